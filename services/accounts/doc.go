// Package accounts owns who may do what: dashboard users and their
// sessions with sign-in throttling (accounts.go, passwords.go), people
// vouched for by an identity provider (identities.go), and
// namespaces and scoped API keys stored as hashes (apikeys.go, admin.go).
// It turns a key or a session into a services.Principal; the other
// packages only read that principal.
package accounts
