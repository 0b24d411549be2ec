package web

import (
	"bytes"
	"encoding/json"
	"iter"
)

// Walking JSON that json.Valid has accepted, by its bytes: the members of
// an object and the elements of an array, as slices of the input. The
// input must be valid JSON; on anything else the walk stops early.

// members yields the names and values of the object b, in order. A name
// with escapes is unescaped; plain names are compared without copying.
func members(b []byte) iter.Seq2[string, []byte] {
	return func(yield func(string, []byte) bool) {
		i := skipSpace(b, 1)
		for i < len(b) && b[i] == '"' {
			end := skipString(b, i)
			name := string(b[i+1 : end-1])
			if bytes.IndexByte(b[i+1:end-1], '\\') >= 0 {
				_ = json.Unmarshal(b[i:end], &name)
			}
			i = skipSpace(b, end)
			if i >= len(b) || b[i] != ':' {
				return
			}
			start := skipSpace(b, i+1)
			end = skipValue(b, start)
			if !yield(name, b[start:end]) {
				return
			}
			i = skipSpace(b, end)
			if i >= len(b) || b[i] != ',' {
				return
			}
			i = skipSpace(b, i+1)
		}
	}
}

// elements yields the elements of the array b, in order.
func elements(b []byte) iter.Seq[[]byte] {
	return func(yield func([]byte) bool) {
		i := skipSpace(b, 1)
		for i < len(b) && b[i] != ']' {
			end := skipValue(b, i)
			if end <= i || !yield(b[i:end]) {
				return
			}
			i = skipSpace(b, end)
			if i >= len(b) || b[i] != ',' {
				return
			}
			i = skipSpace(b, i+1)
		}
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index just past the string that starts at b[i].
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(b)
}

// skipValue returns the index just past the value that starts at b[i].
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return i
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				i = skipString(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
		}
		return len(b)
	}
	for i < len(b) && b[i] != ',' && b[i] != '}' && b[i] != ']' && b[i] != ' ' && b[i] != '\t' && b[i] != '\n' && b[i] != '\r' {
		i++
	}
	return i
}
