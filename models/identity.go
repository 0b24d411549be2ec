package models

import "time"

// Identity links a user to a person at an OpenID Connect provider: the
// issuer and the subject it gives them, which stay the same when their
// email changes.
type Identity struct {
	Issuer       string `gorm:"primaryKey"`
	Subject      string `gorm:"primaryKey"`
	UserID       string
	Email        string // as the provider last said it
	CreatedAt    time.Time
	LastSignInAt time.Time
}

// SSOLogin is a sign-in sent to the provider and not back yet. StateHash is
// the SHA-256 of the state the browser carries; the row is deleted when
// the browser comes back, so each state is used once.
type SSOLogin struct {
	StateHash    []byte `gorm:"primaryKey"`
	Nonce        string
	CodeVerifier string
	Next         string
	ExpiresAt    time.Time
}

// TableName keeps gorm from naming the table s_s_o_logins.
func (SSOLogin) TableName() string { return "sso_logins" }
