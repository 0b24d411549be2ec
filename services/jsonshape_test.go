package services

import (
	"strings"
	"testing"
)

func TestJSONShape(t *testing.T) {
	for _, c := range []struct {
		doc           string
		depth, values int
	}{
		{`{}`, 1, 1},
		{`{"a":1}`, 1, 3},
		{`{"a":[1,2,{"b":null}],"c":"x]\"["}`, 3, 10},
		{`"just a string with { and ["`, 0, 1},
		{` [ true , false , -1.5e3 ] `, 1, 4},
		{strings.Repeat("[", 40) + strings.Repeat("]", 40), 40, 40},
	} {
		d, v := JSONShape([]byte(c.doc))
		if d != c.depth || v != c.values {
			t.Errorf("JSONShape(%s) = %d deep, %d values; want %d, %d", c.doc, d, v, c.depth, c.values)
		}
	}
}

func TestCanonicalizeKeepsBigIntegersExact(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"b":12345678901234567890,"a":1.50}`, `{"a":1.5,"b":12345678901234567890}`},
		{`{"amount":12345678901234567891}`, `{"amount":12345678901234567891}`},
		{`[-9007199254740993, 9007199254740992, 1e21, "12345678901234567890"]`, `[-9007199254740993,9007199254740992,1e+21,"12345678901234567890"]`},
		{`{"n":123456789012345, "s":"a\"1234567890123456789"}`, `{"n":123456789012345,"s":"a\"1234567890123456789"}`},
		{`{"x":[{"y":99999999999999999999}],"z":99999999999999999998}`, `{"x":[{"y":99999999999999999999}],"z":99999999999999999998}`},
	} {
		out, err := Canonicalize([]byte(c.in))
		if err != nil {
			t.Fatal(err)
		}
		if string(out) != c.want {
			t.Errorf("Canonicalize(%s) = %s, want %s", c.in, out, c.want)
		}
	}
	a, _ := Canonicalize([]byte(`{"amount":12345678901234567890}`))
	b, _ := Canonicalize([]byte(`{"amount":12345678901234567891}`))
	if Fingerprint("t", a) == Fingerprint("t", b) {
		t.Error("amounts that differ in the last digit have one fingerprint")
	}
}
