package driver

import (
	"strings"
	"unicode/utf8"
)

// Searching actions (SPEC "Actions"): q matches a key or a reference
// exactly, or by prefix when it ends in *; tool and agent take * wildcards
// as policy patterns do (* is any run of characters, nothing else is
// special).

// SearchPrefix reports whether q asks for a prefix, and the prefix.
func SearchPrefix(q string) (string, bool) {
	if p, ok := strings.CutSuffix(q, "*"); ok {
		return p, true
	}
	return q, false
}

// PrefixEnd is the least string after every string that begins with p, in
// code point order (byte order of UTF-8, PostgreSQL's "C" collation and
// SQLite's BINARY): p's last code point plus one, after dropping trailing
// U+10FFFF. With a range [p, PrefixEnd(p)) an index finds a prefix. "" when
// nothing bounds it (p empty or all U+10FFFF).
func PrefixEnd(p string) string {
	for p != "" {
		r, size := utf8.DecodeLastRuneInString(p)
		p = p[:len(p)-size]
		if r == utf8.MaxRune {
			continue
		}
		r++
		if r >= 0xD800 && r <= 0xDFFF { // no surrogates in UTF-8
			r = 0xE000
		}
		return p + string(r)
	}
	return ""
}

// IsPattern reports whether a tool or agent filter has wildcards.
func IsPattern(v string) bool { return strings.Contains(v, "*") }

// LikePattern writes a * pattern for LIKE ... ESCAPE '\'.
func LikePattern(v string) string {
	r := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`, `*`, `%`)
	return r.Replace(v)
}

// GlobPattern writes a * pattern for SQLite's GLOB (case-sensitive, as
// PostgreSQL's LIKE is): ? and [ are taken literally.
func GlobPattern(v string) string {
	r := strings.NewReplacer(`?`, `[?]`, `[`, `[[]`)
	return r.Replace(v)
}
