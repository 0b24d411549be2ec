package sso

import (
	"fmt"
	"strings"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/accounts"
)

// Rule maps the values of one claim of the ID token to what a person may
// do. Each entry of ARBITER_OIDC_GROUPS is VALUE=ROLE[:NAMESPACE]: admin
// (no namespace), or viewer or operator in NAMESPACE ("*", the default,
// for every namespace). A person gets the union of the entries their claim
// values match, exactly (case matters): admin if any entry says so, else
// in each namespace the stronger of viewer and operator. No match is no
// role: the sign-in is refused.
type Rule struct {
	// Claim names the claim: a top-level name ("groups",
	// "https://example.com/roles"), or a dotted path into nested objects
	// ("realm_access.roles") when no top-level claim has that name.
	Claim   string
	entries map[string][]grant
}

type grant struct {
	role      services.Role
	namespace string // "" for admin
}

// ParseRule reads the entries of ARBITER_OIDC_GROUPS for claim.
func ParseRule(claim string, entries []string) (Rule, error) {
	if strings.TrimSpace(claim) == "" {
		return Rule{}, fmt.Errorf("the role claim must be named")
	}
	r := Rule{Claim: strings.TrimSpace(claim), entries: map[string][]grant{}}
	for _, e := range entries {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		i := strings.LastIndex(e, "=")
		if i <= 0 {
			return Rule{}, fmt.Errorf("%q: write VALUE=ROLE[:NAMESPACE], e.g. payments-ops=operator:payments", e)
		}
		value, spec := e[:i], e[i+1:]
		roleName, ns, hasNS := strings.Cut(spec, ":")
		g := grant{role: services.Role(roleName), namespace: services.Everywhere}
		switch g.role {
		case services.RoleAdmin:
			if hasNS {
				return Rule{}, fmt.Errorf("%q: an admin is one everywhere; leave out the namespace", e)
			}
			g.namespace = ""
		case services.RoleViewer, services.RoleOperator:
			if hasNS {
				g.namespace = ns
			}
			if g.namespace != services.Everywhere {
				if err := services.ValidateNamespace(g.namespace); err != nil {
					return Rule{}, fmt.Errorf("%q: %w", e, err)
				}
			}
		default:
			return Rule{}, fmt.Errorf("%q: unknown role %q: use admin, operator or viewer", e, roleName)
		}
		r.entries[value] = append(r.entries[value], g)
	}
	if len(r.entries) == 0 {
		return Rule{}, fmt.Errorf("no entries: without any, nobody could sign in through the provider")
	}
	return r, nil
}

// Grants applies the rule to an ID token's claims.
func (r Rule) Grants(claims map[string]any) accounts.Grants {
	g := accounts.Grants{Namespaces: map[string]services.Role{}}
	for _, v := range claimValues(claims, r.Claim) {
		for _, e := range r.entries[v] {
			switch {
			case e.role == services.RoleAdmin:
				g.Admin = true
			case g.Namespaces[e.namespace] != services.RoleOperator:
				g.Namespaces[e.namespace] = e.role
			}
		}
	}
	if g.Admin {
		g.Namespaces = nil
	}
	return g
}

// claimValues returns a claim's strings: a list of strings, or one string.
func claimValues(claims map[string]any, name string) []string {
	v, ok := claims[name]
	if !ok {
		var cur any = claims
		for part := range strings.SplitSeq(name, ".") {
			m, isMap := cur.(map[string]any)
			if !isMap {
				return nil
			}
			cur = m[part]
		}
		v = cur
	}
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		out := make([]string, 0, len(v))
		for _, x := range v {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}
