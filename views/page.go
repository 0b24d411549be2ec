package views

// Page is what every full page needs besides its content.
type Page struct {
	Title string
	Nav   string    // the active navigation item: triage, actions, admin
	User  *UserInfo // nil when signed out
	CSRF  string    // the session's CSRF token, for forms and htmx requests
	Flash string    // a one-line notice shown at the top
}

// UserInfo describes the signed-in user.
type UserInfo struct {
	Email   string
	Role    string // admin, or where the user is a member ("operator in team-a")
	Decides bool   // an admin, or an operator somewhere
}

// CanDecide reports whether the user may take decisions somewhere.
func (u *UserInfo) CanDecide() bool { return u != nil && u.Decides }

// IsAdmin reports whether the user may manage namespaces, keys and users.
func (u *UserInfo) IsAdmin() bool { return u != nil && u.Role == "admin" }

// htmxHeaders carries the CSRF token on every htmx request.
func (p Page) htmxHeaders() string {
	return `{"X-CSRF-Token": "` + p.CSRF + `"}`
}
