package services

// Role is what an API key or a principal may do.
type Role string

const (
	RoleAgent    Role = "agent"    // write entries, read its namespace
	RoleReader   Role = "reader"   // read its namespace
	RoleOperator Role = "operator" // read and decide in its namespace
	RoleAdmin    Role = "admin"    // global
)

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
