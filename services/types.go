package services

import "regexp"

// Role is what an API key or a principal may do.
type Role string

const (
	RoleAgent    Role = "agent"    // write entries, read its namespace
	RoleReader   Role = "reader"   // read its namespace
	RoleOperator Role = "operator" // read and decide in its namespace
	RoleAdmin    Role = "admin"    // global
	// RoleViewer is a dashboard user's role that may read everything and
	// decide nothing.
	RoleViewer Role = "viewer"
)

// UserRoles are the roles of dashboard users.
var UserRoles = []Role{RoleViewer, RoleOperator, RoleAdmin}

// Principal is the authenticated caller of a service method.
type Principal struct {
	Kind      string // "api_key" or "user"
	ID        string
	Name      string
	Role      Role
	Namespace string // empty for admins
}

// CanWrite reports whether p may write entries.
func (p Principal) CanWrite() bool { return p.Role == RoleAgent }

// CanDecide reports whether p may take operator decisions.
func (p Principal) CanDecide() bool { return p.Role == RoleOperator || p.Role == RoleAdmin }

// Sees reports whether p may see data of namespace ns.
func (p Principal) Sees(ns string) bool { return p.Global() || p.Namespace == ns }

// Global reports whether p sees every namespace: admin keys and dashboard
// users do.
func (p Principal) Global() bool { return p.Role == RoleAdmin || p.Kind == "user" }

var namespaceName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

// ValidateNamespace checks a namespace name: lowercase letters, digits, '.',
// '_' and '-', 1 to 63 characters.
func ValidateNamespace(ns string) error {
	if !namespaceName.MatchString(ns) {
		return Errorf(CodeInvalid, "namespace %q must be 1 to 63 lowercase letters, digits, '.', '_' or '-', starting with a letter or digit", ns)
	}
	return nil
}
