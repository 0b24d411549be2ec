// Package sso owns single sign-on with an OpenID Connect provider: the
// authorization code flow with PKCE, state and nonce (sso.go, logins kept
// single-use in sso_logins), and the rule that maps a claim of the ID token
// (groups, by default) to a role and memberships (rule.go). Who the person
// becomes, and their session, is the accounts package's
// (accounts.SignInIdentity).
package sso
