package services

import (
	"maps"
	"regexp"
	"slices"
)

// Role is what an API key or a principal may do.
type Role string

const (
	RoleAgent    Role = "agent"    // write entries, read its namespace
	RoleReader   Role = "reader"   // read its namespace
	RoleOperator Role = "operator" // read and decide in its namespace
	RoleAdmin    Role = "admin"    // global
	// RoleViewer is a person's role that may read and decide nothing, in
	// the namespaces of their membership.
	RoleViewer Role = "viewer"
)

// UserRoles are the roles of dashboard users.
var UserRoles = []Role{RoleViewer, RoleOperator, RoleAdmin}

// Everywhere is the namespace of a membership that holds in every namespace.
const Everywhere = "*"

// Principal is the authenticated caller of a service method.
type Principal struct {
	Kind      string // "api_key" or "user"
	ID        string
	Name      string
	Role      Role
	Namespace string // an API key's namespace; empty for admins and people
	// Memberships are a person's roles (viewer or operator) per namespace,
	// or Everywhere; an admin needs none.
	Memberships map[string]Role
	// OwnerID and OwnerEmail name the person an API key belongs to, whose
	// approvals it gives; empty for a key without an (active) owner, which
	// may not approve, and for people, who are themselves.
	OwnerID, OwnerEmail string
}

// CanWrite reports whether p may write entries.
func (p Principal) CanWrite() bool { return p.Role == RoleAgent }

// CanDecide reports whether p may take operator decisions somewhere.
func (p Principal) CanDecide() bool {
	if p.Kind == "user" && p.Role != RoleAdmin {
		return slices.Contains(slices.Collect(maps.Values(p.Memberships)), RoleOperator)
	}
	return p.Role == RoleOperator || p.Role == RoleAdmin
}

// DecidesIn reports whether p may take operator decisions in namespace ns.
func (p Principal) DecidesIn(ns string) bool {
	switch {
	case p.Role == RoleAdmin:
		return true
	case p.Kind == "user":
		return p.Memberships[ns] == RoleOperator || p.Memberships[Everywhere] == RoleOperator
	}
	return p.Role == RoleOperator && p.Namespace == ns
}

// Sees reports whether p may see data of namespace ns.
func (p Principal) Sees(ns string) bool {
	if p.Kind == "user" && p.Role != RoleAdmin {
		_, member := p.Memberships[ns]
		return member || p.Global()
	}
	return p.Global() || p.Namespace == ns
}

// Global reports whether p sees every namespace: admin keys, admins and
// people who are members everywhere do.
func (p Principal) Global() bool {
	_, everywhere := p.Memberships[Everywhere]
	return p.Role == RoleAdmin || (p.Kind == "user" && everywhere)
}

// Scope narrows a read to namespace ns (every namespace p sees when empty):
// the namespace and the set to filter by (empty: no restriction), or none
// when p sees nothing there, which is an empty answer, never an error.
func (p Principal) Scope(ns string) (one string, among []string, none bool) {
	return p.scope(ns, p.Sees, p.Global())
}

// DecisionScope is Scope for decisions: the namespaces p decides in.
func (p Principal) DecisionScope(ns string) (one string, among []string, none bool) {
	return p.scope(ns, p.DecidesIn, p.DecidesIn(Everywhere))
}

func (p Principal) scope(ns string, allowed func(string) bool, everywhere bool) (string, []string, bool) {
	switch {
	case ns != "":
		return ns, nil, !allowed(ns)
	case everywhere:
		return "", nil, false
	case p.Kind != "user":
		return p.Namespace, nil, p.Namespace == "" || !allowed(p.Namespace)
	}
	var among []string
	for m := range p.Memberships {
		if m != Everywhere && allowed(m) {
			among = append(among, m)
		}
	}
	slices.Sort(among)
	return "", among, len(among) == 0
}

var namespaceName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

// ValidateNamespace checks a namespace name: lowercase letters, digits, '.',
// '_' and '-', 1 to 63 characters.
func ValidateNamespace(ns string) error {
	if !namespaceName.MatchString(ns) {
		return Errorf(CodeInvalid, "namespace %q must be 1 to 63 lowercase letters, digits, '.', '_' or '-', starting with a letter or digit", ns)
	}
	return nil
}
