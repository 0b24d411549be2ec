package mcpgateway

import (
	"fmt"
	"regexp"
	"strings"
)

// Tool patterns: a tool name, or a name with * standing for any run of
// characters, as approval policies write them. MCP tool names are letters,
// digits, _, - and . (the specification's recommended set, plus / which
// some servers use), so anything else in a pattern is a mistake: a glob or
// regular expression syntax Arbiter does not read ("refund?", "[a-z]*").

var patternChars = regexp.MustCompile(`^[A-Za-z0-9_./*-]+$`)

func checkPattern(p string) error {
	switch {
	case p == "":
		return fmt.Errorf("match is required: a tool name or a pattern such as \"find_*\"")
	case len(p) > 128:
		return fmt.Errorf("match %q is longer than 128 characters", p)
	case !patternChars.MatchString(p):
		return fmt.Errorf("match %q: only letters, digits, _ - . / and * (any run of characters) may appear in a pattern", p)
	}
	return nil
}

// isPattern reports whether p has a wildcard.
func isPattern(p string) bool { return strings.Contains(p, "*") }

// matchPattern reports whether name matches the pattern p (checked by
// checkPattern).
func matchPattern(p, name string) bool {
	parts := strings.Split(p, "*")
	if len(parts) == 1 {
		return p == name
	}
	if !strings.HasPrefix(name, parts[0]) {
		return false
	}
	name = name[len(parts[0]):]
	last := parts[len(parts)-1]
	for _, mid := range parts[1 : len(parts)-1] {
		i := strings.Index(name, mid)
		if i < 0 {
			return false
		}
		name = name[i+len(mid):]
	}
	return strings.HasSuffix(name, last)
}
