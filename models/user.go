package models

import "time"

// User is a person who signs in to the dashboard.
type User struct {
	ID    string `gorm:"primaryKey"`
	Email string
	// Role is admin (sees and decides everywhere), or viewer or operator:
	// then the user's memberships say where, and Role is the strongest of
	// them, for display.
	Role         string
	PasswordHash string
	DisabledAt   *time.Time
	// MustChangePassword sends the user to the change-password page until
	// they choose their own (the first admin, whose password was printed).
	MustChangePassword bool
	CreatedAt          time.Time
	UpdatedAt          time.Time
}

// Session is a signed-in browser. TokenHash is the SHA-256 of the cookie's
// token; the token itself is never stored.
type Session struct {
	TokenHash  []byte `gorm:"primaryKey"`
	UserID     string
	CSRFToken  string `gorm:"column:csrf_token"`
	CreatedAt  time.Time
	LastSeenAt time.Time
	ExpiresAt  time.Time
	Address    string
	UserAgent  string
	// AuthenticatedAt is when the user last gave their password in this
	// session: at sign-in, or to confirm a sensitive admin action.
	AuthenticatedAt time.Time
}

// Membership gives a user a role in one namespace, or in every namespace
// when Namespace is "*".
type Membership struct {
	UserID    string `gorm:"primaryKey"`
	Namespace string `gorm:"primaryKey"`
	Role      string // viewer or operator
	CreatedAt time.Time
}

// SignInFailure counts failed sign-ins for one subject: an account
// ("account:EMAIL") or an address ("address:IP").
type SignInFailure struct {
	Subject     string `gorm:"primaryKey"`
	Failures    int
	WindowStart time.Time
	LockedUntil *time.Time
}
