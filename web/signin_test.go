package web_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/arbiter-ledger/arbiter/services/accounts"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
)

func TestSignInAndOut(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		pw := e.user("ops@example.com", services.RoleOperator)
		b := e.browser()

		p := b.get("/")
		require.Equal(t, http.StatusSeeOther, p.status, "anonymous visitors go to sign-in")
		require.Equal(t, "/signin?next=%2F", p.header.Get("Location"))

		p = b.get("/signin")
		require.Equal(t, http.StatusOK, p.status)
		require.Equal(t, 1, p.testid("signin-form").Length())

		p = b.post("/signin", url.Values{"email": {"ops@example.com"}, "password": {"wrong password!!"}})
		require.Equal(t, http.StatusUnauthorized, p.status)
		require.Equal(t, "wrong email or password", strings.TrimSpace(p.testid("signin-error").Text()))
		require.Empty(t, sessionCookie(t, e, b), "no session after a wrong password")

		p = b.post("/signin", url.Values{"email": {"ops@example.com"}, "password": {pw}, "next": {"/actions?status=timed_out"}})
		require.Equal(t, http.StatusSeeOther, p.status)
		require.Equal(t, "/actions?status=timed_out", p.header.Get("Location"))
		first := sessionCookie(t, e, b)
		require.NotEmpty(t, first)

		// Signing in again renews the token.
		b.get("/signin")
		b2 := e.browser()
		b2.signIn("ops@example.com", pw)
		require.NotEqual(t, first, sessionCookie(t, e, b2))

		p = b.get("/admin/namespaces")
		require.Equal(t, http.StatusForbidden, p.status, "an operator is not an admin")
		require.Equal(t, 1, p.testid("error-page").Length())

		p = b.post("/signout", nil) // with the token of the page last shown

		require.Equal(t, http.StatusSeeOther, p.status)
		p = b.get("/")
		require.Equal(t, http.StatusSeeOther, p.status, "signed out on the server")
	})
}

func TestSignInRefusals(t *testing.T) {
	t.Parallel()
	e := newEnv(t, dbtest.Open(t, services.SQLite))
	pw := e.user("ops@example.com", services.RoleOperator)

	b := e.browser()
	b.get("/signin")
	p := b.post("/signin", url.Values{"email": {"ops@example.com"}, "password": {pw}, "csrf_token": {"forged"}})
	require.Equal(t, http.StatusForbidden, p.status, "the sign-in form has a CSRF token too")

	for _, next := range []string{"https://evil.example/", "//evil.example/", "/\\evil.example"} {
		b := e.browser()
		b.get("/signin")
		p := b.post("/signin", url.Values{"email": {"ops@example.com"}, "password": {pw}, "next": {next}})
		require.Equal(t, http.StatusSeeOther, p.status)
		require.Equal(t, "/", p.header.Get("Location"), "no open redirect via %q", next)
	}

	// Throttling: failures space an account's attempts out but never lock
	// its owner out; an address that keeps failing is refused (the security
	// table has the details).
	b = e.browser()
	b.get("/signin")
	for range 6 {
		b.post("/signin", url.Values{"email": {"ops@example.com"}, "password": {"not the password"}})
	}
	p = b.post("/signin", url.Values{"email": {"ops@example.com"}, "password": {pw}})
	require.Equal(t, http.StatusSeeOther, p.status)
	b = e.browser()
	b.get("/signin")
	for i := range 20 {
		b.post("/signin", url.Values{"email": {fmt.Sprintf("nobody%d@example.com", i)}, "password": {"not the password"}})
	}
	p = b.post("/signin", url.Values{"email": {"ops@example.com"}, "password": {pw}})
	require.Equal(t, http.StatusTooManyRequests, p.status)
	require.Contains(t, p.testid("signin-error").Text(), "too many failed sign-ins")
}

func TestCSRFAndSessionExpiry(t *testing.T) {
	t.Parallel()
	st := dbtest.Open(t, services.SQLite)
	e := newEnv(t, st)
	pw := e.user("ops@example.com", services.RoleOperator)
	b := e.browser()
	b.signIn("ops@example.com", pw)

	p := b.post("/signout", url.Values{"csrf_token": {""}})
	require.Equal(t, http.StatusForbidden, p.status, "a POST without the CSRF token is refused")
	p = b.post("/signout", url.Values{"csrf_token": {"forged"}})
	require.Equal(t, http.StatusForbidden, p.status)
	p = b.get("/")
	require.NotEqual(t, http.StatusSeeOther, p.status, "still signed in")

	req, _ := http.NewRequest("POST", e.srv.URL+"/signout", strings.NewReader("csrf_token="+b.csrf))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "https://evil.example")
	p = b.do(req)
	require.Equal(t, http.StatusForbidden, p.status, "a cross-site POST is refused even with the token")

	// Idle timeout.
	short := newEnvWith(t, st, func(a *accounts.Accounts) { a.IdleTimeout = 300 * time.Millisecond })
	b = short.browser()
	b.signIn("ops@example.com", pw)
	time.Sleep(400 * time.Millisecond)
	p = b.get("/")
	require.Equal(t, http.StatusSeeOther, p.status, "an idle session has expired")

	// Absolute timeout.
	short = newEnvWith(t, st, func(a *accounts.Accounts) { a.AbsoluteTimeout = 300 * time.Millisecond })
	b = short.browser()
	b.signIn("ops@example.com", pw)
	time.Sleep(400 * time.Millisecond)
	p = b.get("/")
	require.Equal(t, http.StatusSeeOther, p.status, "a session past its absolute lifetime has expired")
}

func TestSecurityHeaders(t *testing.T) {
	t.Parallel()
	e := newEnv(t, dbtest.Open(t, services.SQLite))
	p := e.browser().get("/signin")
	csp := p.header.Get("Content-Security-Policy")
	for _, want := range []string{"script-src 'self'", "object-src 'none'", "base-uri 'none'", "frame-ancestors 'none'"} {
		require.Contains(t, csp, want)
	}
	require.NotContains(t, csp, "unsafe-inline")
	require.Equal(t, "nosniff", p.header.Get("X-Content-Type-Options"))
	require.NotEmpty(t, p.header.Get("Referrer-Policy"))
	require.Empty(t, p.doc.Find("script:not([src])").Nodes, "no inline scripts")
	require.Empty(t, p.doc.Find("[style]").Nodes, "no inline styles")

	p = e.browser().get("/no/such/page")
	require.Equal(t, http.StatusNotFound, p.status)
	require.Equal(t, 1, p.testid("error-page").Length(), "404 in the dashboard's design")
}

func sessionCookie(t *testing.T, e *env, b *browser) string {
	u, _ := url.Parse(e.srv.URL)
	for _, c := range b.client.Jar.Cookies(u) {
		if c.Name == "arbiter_session" {
			return c.Value
		}
	}
	return ""
}
