package models

import "time"

// User is a person who signs in to the dashboard.
type User struct {
	ID           string `gorm:"primaryKey"`
	Email        string
	Role         string // viewer, operator or admin
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
}

// SignInFailure counts failed sign-ins for one subject: an account
// ("account:EMAIL") or an address ("address:IP").
type SignInFailure struct {
	Subject     string `gorm:"primaryKey"`
	Failures    int
	WindowStart time.Time
	LockedUntil *time.Time
}
