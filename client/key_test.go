package client_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"

	"github.com/arbiter-ledger/arbiter/client"
)

func TestKey(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		parts []string
		want  string
	}{
		{[]string{"refund", "order-8812"}, "refund:order-8812"},
		{[]string{"email", "welcome", "cust-42"}, "email:welcome:cust-42"},
		{[]string{"a:b", "c"}, "a%3Ab:c"},
		{[]string{"a", "b:c"}, "a:b%3Ac"},
		{[]string{"100%", "x"}, "100%25:x"},
		{[]string{"tab\there", "nl\n"}, "tab%09here:nl%0A"},
		{[]string{"bad\xffutf8"}, "bad%FFutf8"},
		{[]string{"café", "Ωmega", "with space"}, "café:Ωmega:with space"},
		{[]string{"single"}, "single"},
	} {
		assert.Equal(t, tc.want, client.Key(tc.parts...), "%q", tc.parts)
	}
	assert.NotEqual(t, client.Key("a:b", "c"), client.Key("a", "b:c"))

	long := strings.Repeat("é", 200) // 400 bytes
	k := client.Key("report", long)
	assert.LessOrEqual(t, len(k), 255)
	assert.True(t, utf8.ValidString(k))
	assert.Regexp(t, `~[0-9a-f]{32}$`, k)
	assert.Equal(t, k, client.Key("report", long), "deterministic")
	assert.NotEqual(t, k, client.Key("report", long+"x"), "still unique")
}
