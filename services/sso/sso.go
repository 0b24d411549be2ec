package sso

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/arbiter-ledger/arbiter/models"
	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/accounts"
)

// LoginTimeout is how long a person has at the provider before the sign-in
// they started is forgotten.
const LoginTimeout = 10 * time.Minute

// Config is the provider and the mapping rule, from ARBITER_OIDC_*.
type Config struct {
	Issuer       string
	ClientID     string
	ClientSecret string
	// Scopes requested besides openid (email and profile by default; add
	// groups for providers that send the groups claim only when asked).
	Scopes    []string
	RoleClaim string
	Groups    []string // the rule's entries, VALUE=ROLE[:NAMESPACE]
}

// SSO signs people in through one OpenID Connect provider.
type SSO struct {
	st       *services.Store
	provider *oidc.Provider
	verifier *oidc.IDTokenVerifier
	oauth    oauth2.Config
	rule     Rule
	now      func() time.Time
	// Issuer is the provider's issuer URL, as configured and as its
	// discovery document states it.
	Issuer string
}

// The refusals a person can meet on the way back from the provider.
var (
	ErrStateUnknown = services.Errorf(services.CodeForbidden,
		"this sign-in was already used, has expired, or was started in another browser; please sign in again")
	ErrTokenRefused = services.Errorf(services.CodeUnauthorized,
		"the identity provider's answer could not be verified; please sign in again")
	ErrProviderRefused = services.Errorf(services.CodeUnauthorized,
		"the identity provider did not complete the sign-in; please sign in again")
)

// New reads the provider's discovery document. The issuer it states must be
// the configured one exactly, or New fails: tokens are checked against it.
func New(ctx context.Context, st *services.Store, cfg Config) (*SSO, error) {
	if cfg.Issuer == "" || cfg.ClientID == "" {
		return nil, fmt.Errorf("sso: the issuer and the client id are required")
	}
	rule, err := ParseRule(cfg.RoleClaim, cfg.Groups)
	if err != nil {
		return nil, fmt.Errorf("sso: the group mapping: %w", err)
	}
	// The provider keeps this context to fetch signing keys later: it must
	// not end with the start-up.
	provider, err := oidc.NewProvider(context.WithoutCancel(ctx), cfg.Issuer)
	if err != nil {
		return nil, fmt.Errorf("sso: discover the provider at %s: %w", cfg.Issuer, err)
	}
	scopes := []string{oidc.ScopeOpenID}
	for _, s := range cfg.Scopes {
		if s = strings.TrimSpace(s); s != "" && s != oidc.ScopeOpenID {
			scopes = append(scopes, s)
		}
	}
	s := &SSO{st: st, provider: provider, rule: rule, now: services.Now, Issuer: cfg.Issuer,
		oauth: oauth2.Config{ClientID: cfg.ClientID, ClientSecret: cfg.ClientSecret, Endpoint: provider.Endpoint(), Scopes: scopes}}
	s.verifier = provider.VerifierContext(context.WithoutCancel(ctx), &oidc.Config{ClientID: cfg.ClientID, Now: func() time.Time { return s.now() }})
	return s, nil
}

// Begin starts a sign-in that comes back to redirectURL and then goes on to
// next: it returns the provider's URL to send the browser to, and the state
// the browser must bring back (the caller keeps it in a cookie, which binds
// the sign-in to this browser). The nonce and the PKCE verifier stay here.
func (s *SSO) Begin(ctx context.Context, redirectURL, next string) (authURL, state string, err error) {
	now := s.now()
	state, nonce, verifier := randomString(), randomString(), oauth2.GenerateVerifier()
	db := s.st.GormWriter().WithContext(ctx)
	if err := db.Where("expires_at < ?", now).Delete(&models.SSOLogin{}).Error; err != nil {
		return "", "", services.DBError("sso: forget expired sign-ins", err)
	}
	row := models.SSOLogin{StateHash: hash(state), Nonce: nonce, CodeVerifier: verifier, Next: next, ExpiresAt: now.Add(LoginTimeout)}
	if err := db.Create(&row).Error; err != nil {
		return "", "", services.DBError("sso: start sign-in", err)
	}
	cfg := s.oauth
	cfg.RedirectURL = redirectURL
	return cfg.AuthCodeURL(state, oidc.Nonce(nonce), oauth2.S256ChallengeOption(verifier)), state, nil
}

// Result is a person back from the provider.
type Result struct {
	Identity accounts.Identity
	Grants   accounts.Grants
	Next     string // where the sign-in was going
	// Claim is the mapped claim's values, to tell a person with no role
	// what the provider said.
	Claim []string
}

// Finish completes the sign-in of state with the provider's code: the state
// is used up whatever happens next (a replay is ErrStateUnknown), the code
// is exchanged with the PKCE verifier, and the ID token must come from the
// issuer, for this client, unexpired, with the nonce. Errors wrap one of
// the refusals above with the detail, for the log.
func (s *SSO) Finish(ctx context.Context, redirectURL, state, code string) (Result, error) {
	login, err := s.take(ctx, state)
	if err != nil {
		return Result{}, err
	}
	cfg := s.oauth
	cfg.RedirectURL = redirectURL
	tok, err := cfg.Exchange(ctx, code, oauth2.VerifierOption(login.CodeVerifier))
	if err != nil {
		return Result{}, fmt.Errorf("sso: exchange the code: %v: %w", err, ErrProviderRefused)
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return Result{}, fmt.Errorf("sso: the token answer has no id_token: %w", ErrTokenRefused)
	}
	idt, err := s.verifier.Verify(ctx, raw)
	if err != nil {
		return Result{}, fmt.Errorf("sso: verify the ID token: %v: %w", err, ErrTokenRefused)
	}
	if idt.Nonce != login.Nonce {
		return Result{}, fmt.Errorf("sso: the ID token's nonce is not this sign-in's: %w", ErrTokenRefused)
	}
	var claims map[string]any
	if err := idt.Claims(&claims); err != nil {
		return Result{}, fmt.Errorf("sso: read the ID token's claims: %v: %w", err, ErrTokenRefused)
	}
	email, _ := claims["email"].(string)
	return Result{
		Identity: accounts.Identity{Issuer: idt.Issuer, Subject: idt.Subject, Email: email, EmailVerified: truthy(claims["email_verified"]),
			AuthTime: authTime(claims["auth_time"])},
		Grants: s.rule.Grants(claims),
		Next:   login.Next,
		Claim:  claimValues(claims, s.rule.Claim),
	}, nil
}

// RoleClaim names the claim the rule reads.
func (s *SSO) RoleClaim() string { return s.rule.Claim }

// take deletes and returns the pending sign-in of state; a second take of
// the same state, or one past its time, finds nothing.
func (s *SSO) take(ctx context.Context, state string) (models.SSOLogin, error) {
	if state == "" {
		return models.SSOLogin{}, ErrStateUnknown
	}
	var login models.SSOLogin
	db := s.st.GormWriter().WithContext(ctx)
	if err := db.Where("state_hash = ?", hash(state)).Limit(1).Find(&login).Error; err != nil {
		return login, services.DBError("sso: find sign-in", err)
	}
	if login.StateHash == nil {
		return login, ErrStateUnknown
	}
	// Deleting is what claims it: of two browsers replaying one state,
	// only one deletes the row.
	res := db.Where("state_hash = ?", login.StateHash).Delete(&models.SSOLogin{})
	if res.Error != nil {
		return login, services.DBError("sso: use sign-in", res.Error)
	}
	if res.RowsAffected != 1 || s.now().After(login.ExpiresAt) {
		return login, ErrStateUnknown
	}
	return login, nil
}

// authTime reads auth_time, when the person last authenticated at the
// provider (seconds since the epoch); zero when the provider did not say.
func authTime(v any) time.Time {
	if secs, ok := v.(float64); ok && secs > 0 {
		return time.Unix(int64(secs), 0).UTC()
	}
	return time.Time{}
}

// truthy reads email_verified, which some providers send as a string.
func truthy(v any) bool {
	switch v := v.(type) {
	case bool:
		return v
	case string:
		return strings.EqualFold(v, "true")
	}
	return false
}

func randomString() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("sso: no randomness: %v", err))
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

func hash(s string) []byte {
	h := sha256.Sum256([]byte(s))
	return h[:]
}
