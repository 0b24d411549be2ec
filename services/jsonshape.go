package services

// Limits on the shape of the JSON an entry or a decision carries (params,
// result, evidence): a document nested thousands deep, or made of tens of
// thousands of tiny values, costs every reader far more than its bytes.
const (
	MaxJSONDepth  = 32
	MaxJSONValues = 10000
)

// JSONShape measures a well-formed JSON text without decoding it: how deep
// its arrays and objects nest, and how many values it holds (every
// container, scalar and object key counts one).
func JSONShape(raw []byte) (depth, values int) {
	cur := 0
	for i := 0; i < len(raw); i++ {
		switch c := raw[i]; c {
		case '{', '[':
			cur++
			values++
			depth = max(depth, cur)
		case '}', ']':
			cur--
		case '"':
			values++
			for i++; i < len(raw) && raw[i] != '"'; i++ {
				if raw[i] == '\\' {
					i++
				}
			}
		case 't', 'f', 'n', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
			values++
			for i+1 < len(raw) && !endsScalar(raw[i+1]) {
				i++
			}
		}
	}
	return depth, values
}

func endsScalar(c byte) bool {
	switch c {
	case ',', ']', '}', ' ', '\t', '\n', '\r', ':':
		return true
	}
	return false
}

// checkJSONShape refuses a well-formed document beyond the shape limits,
// naming the field.
func checkJSONShape(name string, raw []byte) error {
	depth, values := JSONShape(raw)
	switch {
	case depth > MaxJSONDepth:
		return Errorf(CodeInvalid, "field %q nests %d levels deep; the limit is %d", name, depth, MaxJSONDepth)
	case values > MaxJSONValues:
		return Errorf(CodeInvalid, "field %q holds %d values; the limit is %d", name, values, MaxJSONValues)
	}
	return nil
}
