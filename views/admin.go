package views

import (
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/arbiter-ledger/arbiter/models"
)

// AdminNamespacesView is the namespaces page.
type AdminNamespacesView struct {
	Namespaces []AdminNamespace
	// ActionsCap is where action counts stop: a count above it shows as "cap+".
	ActionsCap int
	Form       NamespaceForm
}

// AdminNamespace is one row of the namespaces table.
type AdminNamespace struct {
	Name       string
	CreatedAt  time.Time
	ActiveKeys int
	Actions    int
}

// NamespaceForm is the create-namespace form as submitted.
type NamespaceForm struct {
	Name  string
	Error string
}

// AdminKeysView is the API keys page.
type AdminKeysView struct {
	Keys       []AdminKey
	Namespaces []string // for the namespace suggestions
	Form       KeyForm
	// New is the key just created: its secret is on this response only.
	New *NewKey
	// Error is a failure of a per-row control (revoke).
	Error string
}

// AdminKey is one row of the API keys table; it never holds a secret.
type AdminKey struct {
	ID        string
	Prefix    string
	Name      string
	Role      string
	Namespace string // empty for global (admin) keys
	Owner     string // the owner's email; empty for a key without an owner
	CreatedAt time.Time
	RevokedAt *time.Time
}

// KeyForm is the create-key form as submitted.
type KeyForm struct {
	Namespace string
	Name      string
	Role      string
	Error     string
}

// NewKey is a key just created, with its secret.
type NewKey struct {
	Key    AdminKey
	Secret string
	// BaseURL is where the API is reached, for the example command.
	BaseURL string
}

// AdminUsersView is the users page.
type AdminUsersView struct {
	Users []AdminUser
	Form  UserForm
	// Namespaces are those a membership can name, besides "*".
	Namespaces  []string
	MinPassword int
	MaxPassword int
	// Error is a failure of a per-row control (role, disable, sessions).
	Error string
}

// AdminUser is one row of the users table.
type AdminUser struct {
	ID         string
	Email      string
	Role       string
	CreatedAt  time.Time
	DisabledAt *time.Time
	// Memberships say where a viewer or operator is one; none for admins.
	Memberships []models.Membership
	Where       string // the memberships in a few words
	// Me marks the signed-in admin, whose own row cannot disable or demote.
	Me bool
}

// UserForm is the create-user form as submitted; the password is never
// echoed back.
type UserForm struct {
	Email     string
	Role      string
	Namespace string // "*" or empty for every namespace
	Error     string
}

// MembershipWhere names a membership's namespace for people.
func MembershipWhere(ns string) string {
	if ns == "*" || ns == "" {
		return "every namespace"
	}
	return ns
}

// adminKeyRoles are the roles an API key can have, with what each may do.
var adminKeyRoles = []struct{ Value, Label string }{
	{"agent", "agent: submits entries in its namespace"},
	{"reader", "reader: reads its namespace"},
	{"operator", "operator: reads and decides in its namespace"},
	{"admin", "admin: everything, in every namespace (no namespace)"},
}

// adminUserRoles are the roles of dashboard users.
var adminUserRoles = []struct{ Value, Label string }{
	{"viewer", "viewer: reads, where a member"},
	{"operator", "operator: reads and decides, where a member"},
	{"admin", "admin: also manages namespaces, keys and users"},
}

func (k AdminKey) where() string {
	if k.Namespace == "" {
		return "global"
	}
	return k.Namespace
}

func (n AdminNamespace) actionsText(limit int) string {
	if n.Actions > limit {
		return strconv.Itoa(limit) + "+"
	}
	return strconv.Itoa(n.Actions)
}

func adminActionsLink(ns string) string { return "/actions?namespace=" + url.QueryEscape(ns) }

func adminUserPath(id, what string) string { return "/admin/users/" + url.PathEscape(id) + "/" + what }

func adminKeyRevokePath(id string) string { return "/admin/keys/" + url.PathEscape(id) + "/revoke" }

// MembershipSummary says where a person is a member: "operator everywhere",
// "operator in a, b; viewer in c", or "no namespace".
func MembershipSummary(ms []models.Membership) string {
	byRole := map[string][]string{}
	for _, m := range ms {
		ns := m.Namespace
		if ns == "*" {
			ns = "everywhere"
		}
		byRole[m.Role] = append(byRole[m.Role], ns)
	}
	var parts []string
	for _, r := range []string{"operator", "viewer"} {
		switch nss := byRole[r]; {
		case len(nss) == 0:
		case nss[0] == "everywhere":
			parts = append(parts, r+" everywhere")
		default:
			parts = append(parts, r+" in "+strings.Join(nss, ", "))
		}
	}
	if len(parts) == 0 {
		return "no namespace"
	}
	return strings.Join(parts, "; ")
}
