package services

import "github.com/arbiter-ledger/arbiter/services/jsontext"

// Limits on the shape of the JSON an entry or a decision carries (params,
// result, evidence): a document nested thousands deep, or made of tens of
// thousands of tiny values, costs every reader far more than its bytes.
const (
	MaxJSONDepth  = 32
	MaxJSONValues = 10000
)

// JSONShape measures a well-formed JSON text without decoding it
// (jsontext.Shape): how deep it nests and how many values it holds.
func JSONShape(raw []byte) (depth, values int) { return jsontext.Shape(raw) }

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
