package web_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/oauth2-proxy/mockoidc"
	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/models"
	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/accounts"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
	"github.com/arbiter-ledger/arbiter/services/sso"
	"github.com/arbiter-ledger/arbiter/web"
)

// Single sign-on against a real OpenID Connect provider running in the test
// (mockoidc): it serves discovery, keys, the authorization and token
// endpoints, checks the PKCE verifier and signs ID tokens with the nonce.

// testGroups is the group mapping the tests configure.
var testGroups = []string{"arbiter-admins=admin", "payments-ops=operator:payments", "readers=viewer:*", "payments-readers=viewer:payments"}

// startProvider runs a provider; tune adjusts it before it starts.
func startProvider(t *testing.T, tune func(*mockoidc.MockOIDC)) *mockoidc.MockOIDC {
	t.Helper()
	m, err := mockoidc.NewServer(nil)
	require.NoError(t, err)
	if tune != nil {
		tune(m)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	require.NoError(t, m.Start(ln, nil))
	t.Cleanup(func() { _ = m.Shutdown() })
	return m
}

// newSSO configures single sign-on at issuer with m's client.
func newSSO(t *testing.T, st *services.Store, m *mockoidc.MockOIDC, issuer string) (*sso.SSO, error) {
	t.Helper()
	return sso.New(context.Background(), st, sso.Config{Issuer: issuer, ClientID: m.ClientID, ClientSecret: m.ClientSecret,
		Scopes: []string{"email", "profile", "groups"}, RoleClaim: "groups", Groups: testGroups})
}

// newSSOEnv starts Arbiter with single sign-on at m.
func newSSOEnv(t *testing.T, st *services.Store, m *mockoidc.MockOIDC, passwordsOff bool) *env {
	t.Helper()
	s, err := newSSO(t, st, m, m.Issuer())
	require.NoError(t, err)
	return newEnvDeps(t, st, func(d *web.Deps) { d.SSO, d.LocalPasswordsOff = s, passwordsOff })
}

func person(sub, email string, groups ...string) *mockoidc.MockUser {
	return &mockoidc.MockUser{Subject: sub, Email: email, EmailVerified: true, Groups: groups}
}

// getURL follows nothing: it returns the answer of one absolute URL.
func (b *browser) getURL(u string) page {
	b.t.Helper()
	req, err := http.NewRequest("GET", u, nil)
	require.NoError(b.t, err)
	return b.do(req)
}

// ssoSignIn goes from the sign-in page's SSO link to the provider and back
// as the provider's next user, and returns the callback's answer and URL.
func (b *browser) ssoSignIn(m *mockoidc.MockOIDC, who *mockoidc.MockUser, next string) (page, string) {
	b.t.Helper()
	m.QueueUser(who)
	start := b.get("/signin/sso?next=" + url.QueryEscape(next))
	require.Equal(b.t, http.StatusSeeOther, start.status, start.body)
	auth := start.header.Get("Location")
	require.True(b.t, strings.HasPrefix(auth, m.AuthorizationEndpoint()), auth)
	q := mustQuery(b.t, auth)
	require.Equal(b.t, "S256", q.Get("code_challenge_method"))
	require.NotEmpty(b.t, q.Get("code_challenge"))
	require.NotEmpty(b.t, q.Get("nonce"))
	require.NotEmpty(b.t, q.Get("state"))
	back := b.getURL(auth)
	require.Equal(b.t, http.StatusFound, back.status, back.body)
	callback := back.header.Get("Location")
	require.True(b.t, strings.HasPrefix(callback, b.e.srv.URL+"/signin/sso/callback?"), callback)
	return b.getURL(callback), callback
}

func mustQuery(t *testing.T, u string) url.Values {
	t.Helper()
	p, err := url.Parse(u)
	require.NoError(t, err)
	return p.Query()
}

func (b *browser) sessionCookie() *http.Cookie {
	u, _ := url.Parse(b.e.srv.URL)
	for _, c := range b.client.Jar.Cookies(u) {
		if c.Name == "arbiter_session" {
			return c
		}
	}
	return nil
}

func memberships(t *testing.T, st *services.Store, userID string) map[string]string {
	t.Helper()
	ms, err := accounts.New(st).Memberships(context.Background(), userID)
	require.NoError(t, err)
	out := map[string]string{}
	for _, m := range ms {
		out[m.Namespace] = m.Role
	}
	return out
}

func TestSSOSignInCreatesUserAndFollowsGroups(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		m := startProvider(t, nil)
		e := newSSOEnv(t, st, m, false)
		b := e.browser()
		p := b.get("/signin")
		require.Equal(t, 1, p.testid("sso-button").Length())
		require.Equal(t, 1, p.testid("signin-form").Length(), "passwords stay on unless turned off")

		p, _ = b.ssoSignIn(m, person("sub-ana", "ana@example.com", "payments-ops", "engineering"), "/actions")
		require.Equal(t, http.StatusSeeOther, p.status, p.body)
		require.Equal(t, "/actions", p.header.Get("Location"))
		home := b.get("/")
		require.Equal(t, http.StatusOK, home.status)
		require.Equal(t, "ana@example.com", strings.TrimSpace(home.testid("current-user").Text()))
		accts := accounts.New(st)
		u, err := accts.UserByEmail(context.Background(), "ana@example.com")
		require.NoError(t, err)
		require.Equal(t, "operator", u.Role)
		require.False(t, accounts.HasPassword(u), "a user created by single sign-on has no password")
		require.Equal(t, map[string]string{"payments": "operator"}, memberships(t, st, u.ID))

		// The next sign-in maps the groups the provider gives then: the
		// operator membership goes, a viewer one everywhere comes; the
		// email changed at the provider and the user stays the same.
		first := b.sessionCookie()
		p, _ = b.ssoSignIn(m, person("sub-ana", "ana.lopez@example.com", "readers"), "/")
		require.Equal(t, http.StatusSeeOther, p.status, p.body)
		require.NotEqual(t, first.Value, b.sessionCookie().Value, "each sign-in gets a new session token")
		again, err := accts.User(context.Background(), u.ID)
		require.NoError(t, err)
		require.Equal(t, "ana.lopez@example.com", again.Email)
		require.Equal(t, "viewer", again.Role)
		require.Equal(t, map[string]string{"*": "viewer"}, memberships(t, st, u.ID))
		sessions, err := accts.Sessions(context.Background(), u.ID)
		require.NoError(t, err)
		require.Len(t, sessions, 1, "the browser's earlier session ended when the new one began")

		// An admin group makes an admin, without memberships.
		p, _ = b.ssoSignIn(m, person("sub-ana", "ana.lopez@example.com", "arbiter-admins", "readers"), "/admin")
		require.Equal(t, http.StatusSeeOther, p.status, p.body)
		require.Equal(t, http.StatusOK, b.get("/admin/users").status)
		again, err = accts.User(context.Background(), u.ID)
		require.NoError(t, err)
		require.Equal(t, "admin", again.Role)
		require.Empty(t, memberships(t, st, u.ID))

		// There is no local password to change: the page says where it is.
		p = b.get("/account/password")
		require.Equal(t, http.StatusOK, p.status)
		require.Contains(t, flatText(p.testid("password-sso")), "kept by your identity provider")
		require.Equal(t, 0, p.testid("password-form").Length())
		p = b.post("/account/password", url.Values{"current": {""}, "password": {"a new long password"}, "confirm": {"a new long password"}})
		require.Equal(t, http.StatusConflict, p.status)

		// A password sign-in cannot reach an account made by single sign-on.
		pb := e.browser()
		pb.get("/signin")
		p = pb.post("/signin", url.Values{"email": {"ana.lopez@example.com"}, "password": {""}})
		require.Equal(t, http.StatusUnauthorized, p.status)
	})
}

func TestSSOReplayedStateIsRefused(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		m := startProvider(t, nil)
		e := newSSOEnv(t, st, m, false)
		b := e.browser()
		p, callback := b.ssoSignIn(m, person("sub-bo", "bo@example.com", "readers"), "/")
		require.Equal(t, http.StatusSeeOther, p.status, p.body)
		state := mustQuery(t, callback).Get("state")

		// The same callback again, even with the state's cookie put back
		// (someone who copied both), is refused: the state was used up.
		u, _ := url.Parse(e.srv.URL)
		b.client.Jar.SetCookies(u, []*http.Cookie{{Name: "arbiter_sso", Value: state, Path: "/"}})
		b.client.Jar.SetCookies(u, []*http.Cookie{{Name: "arbiter_session", Value: "", Path: "/", MaxAge: -1}})
		p = b.getURL(callback)
		require.Equal(t, http.StatusForbidden, p.status, p.body)
		require.Contains(t, p.testid("signin-error").Text(), "already used")
		require.Nil(t, b.sessionCookie(), "a refused sign-in opens no session")

		// A state started in another browser is refused here too, before
		// the provider's code is spent.
		other := e.browser()
		m.QueueUser(person("sub-bo", "bo@example.com", "readers"))
		start := other.get("/signin/sso")
		back := other.getURL(start.header.Get("Location"))
		p = e.browser().getURL(back.header.Get("Location"))
		require.Equal(t, http.StatusForbidden, p.status, p.body)
		// The browser that started it still can finish.
		p = other.getURL(back.header.Get("Location"))
		require.Equal(t, http.StatusSeeOther, p.status, p.body)
	})
}

func TestSSOWrongIssuerIsRefused(t *testing.T) {
	t.Parallel()
	st := dbtest.Open(t, services.SQLite)
	m := startProvider(t, nil)

	// Configured with another issuer URL than the provider states: no start.
	wrong := strings.Replace(m.Issuer(), "127.0.0.1", "localhost", 1)
	_, err := newSSO(t, st, m, wrong)
	require.ErrorContains(t, err, "issuer")

	// A provider whose discovery document names one issuer while its ID
	// tokens carry another (here a proxy in front of m rewrites the
	// document): the token is refused and no session opens.
	proxy := httptest.NewServer(nil)
	t.Cleanup(proxy.Close)
	proxy.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		res, err := http.Get(m.Addr() + r.URL.Path)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer res.Body.Close()
		raw, _ := io.ReadAll(res.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(strings.ReplaceAll(string(raw), `"issuer":"`+m.Issuer()+`"`, `"issuer":"`+proxy.URL+`/oidc"`)))
	})
	s, err := newSSO(t, st, m, proxy.URL+"/oidc")
	require.NoError(t, err)
	e := newEnvDeps(t, st, func(d *web.Deps) { d.SSO = s })
	b := e.browser()
	p, _ := b.ssoSignIn(m, person("sub-cy", "cy@example.com", "readers"), "/")
	require.Equal(t, http.StatusUnauthorized, p.status, p.body)
	require.Contains(t, p.testid("signin-error").Text(), "could not be verified")
	require.Nil(t, b.sessionCookie())
	require.Contains(t, e.log.String(), "issued by a different provider")
}

func TestSSOExpiredTokenIsRefused(t *testing.T) {
	t.Parallel()
	st := dbtest.Open(t, services.SQLite)
	// The provider's ID tokens expire before they are issued.
	m := startProvider(t, func(m *mockoidc.MockOIDC) { m.AccessTTL = -time.Minute })
	e := newSSOEnv(t, st, m, false)
	b := e.browser()
	p, _ := b.ssoSignIn(m, person("sub-di", "di@example.com", "readers"), "/")
	require.Equal(t, http.StatusUnauthorized, p.status, p.body)
	require.Contains(t, p.testid("signin-error").Text(), "could not be verified")
	require.Nil(t, b.sessionCookie())
	require.Contains(t, e.log.String(), "expired")
	_, err := accounts.New(st).UserByEmail(context.Background(), "di@example.com")
	require.ErrorIs(t, err, services.ErrNotFound)
}

func TestSSOGroupsGivingNoRoleAreRefused(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		m := startProvider(t, nil)
		e := newSSOEnv(t, st, m, false)
		accts := accounts.New(st)

		// A first sign-in with no mapped group: a clear page, no user, no
		// session.
		b := e.browser()
		p, _ := b.ssoSignIn(m, person("sub-ed", "ed@example.com", "engineering", "design"), "/")
		require.Equal(t, http.StatusForbidden, p.status, p.body)
		msg := p.testid("signin-error").Text()
		require.Contains(t, msg, "no role in Arbiter")
		require.Contains(t, msg, `"groups" holds engineering, design`)
		require.Nil(t, b.sessionCookie())
		_, err := accts.UserByEmail(context.Background(), "ed@example.com")
		require.ErrorIs(t, err, services.ErrNotFound)

		// A user whose groups no longer map: refused, their memberships
		// go and their other sessions end.
		first := e.browser()
		p, _ = first.ssoSignIn(m, person("sub-fay", "fay@example.com", "payments-readers"), "/")
		require.Equal(t, http.StatusSeeOther, p.status, p.body)
		require.Equal(t, http.StatusOK, first.get("/").status)
		u, err := accts.UserByEmail(context.Background(), "fay@example.com")
		require.NoError(t, err)
		require.Equal(t, map[string]string{"payments": "viewer"}, memberships(t, st, u.ID))

		p, _ = e.browser().ssoSignIn(m, person("sub-fay", "fay@example.com", "alumni"), "/")
		require.Equal(t, http.StatusForbidden, p.status, p.body)
		require.Empty(t, memberships(t, st, u.ID))
		require.Equal(t, http.StatusSeeOther, first.get("/").status, "the earlier session ended")
	})
}

func TestSSOLinksLocalUserByVerifiedEmail(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		m := startProvider(t, nil)
		e := newSSOEnv(t, st, m, false)
		pw := e.user("gus@example.com", services.RoleViewer)
		e.user("hal@example.com", services.RoleViewer)
		accts := accounts.New(st)

		// Unverified at the provider: the local account is not taken over.
		b := e.browser()
		unverified := person("sub-hal", "hal@example.com", "payments-ops")
		unverified.EmailVerified = false
		p, _ := b.ssoSignIn(m, unverified, "/")
		require.Equal(t, http.StatusForbidden, p.status, p.body)
		require.Contains(t, p.testid("signin-error").Text(), "not say the address is verified")

		// Verified: linked, memberships from the provider, password kept.
		p, _ = b.ssoSignIn(m, person("sub-gus", "gus@example.com", "payments-ops"), "/")
		require.Equal(t, http.StatusSeeOther, p.status, p.body)
		u, err := accts.UserByEmail(context.Background(), "gus@example.com")
		require.NoError(t, err)
		require.Equal(t, map[string]string{"payments": "operator"}, memberships(t, st, u.ID))
		ids, err := accts.Identities(context.Background(), u.ID)
		require.NoError(t, err)
		require.Equal(t, []string{"sub-gus"}, []string{ids[0].Subject})
		e.browser().signIn("gus@example.com", pw)

		// Another subject at the same provider with that email does not
		// get the account.
		p, _ = e.browser().ssoSignIn(m, person("sub-impostor", "gus@example.com", "arbiter-admins"), "/")
		require.Equal(t, http.StatusForbidden, p.status, p.body)
		again, err := accts.User(context.Background(), u.ID)
		require.NoError(t, err)
		require.Equal(t, "operator", again.Role)
	})
}

func TestLocalPasswordsOff(t *testing.T) {
	t.Parallel()
	st := dbtest.Open(t, services.SQLite)
	m := startProvider(t, nil)
	e := newSSOEnv(t, st, m, true)
	pw := e.user("ivy@example.com", services.RoleAdmin)
	b := e.browser()
	p := b.get("/signin")
	require.Equal(t, 1, p.testid("sso-button").Length())
	require.Zero(t, p.testid("signin-form").Length())
	p = b.post("/signin", url.Values{"email": {"ivy@example.com"}, "password": {pw}})
	require.Equal(t, http.StatusForbidden, p.status)
	require.Contains(t, p.testid("signin-error").Text(), "Passwords are turned off")
	require.Nil(t, b.sessionCookie())
}

func TestSSOReauthenticatesThroughTheProvider(t *testing.T) {
	t.Parallel()
	st := dbtest.Open(t, services.SQLite)
	m := startProvider(t, nil)
	e := newSSOEnv(t, st, m, false)
	b := e.browser()
	p, _ := b.ssoSignIn(m, person("sub-jo", "jo@example.com", "arbiter-admins"), "/admin/users")
	require.Equal(t, http.StatusSeeOther, p.status, p.body)
	b.get("/admin/users")
	// The sign-in was long ago.
	require.NoError(t, st.GormWriter().Model(&models.Session{}).Where("1 = 1").
		Update("authenticated_at", time.Now().Add(-time.Hour)).Error)
	form := url.Values{"email": {"kim@example.com"}, "role": {"viewer"}, "password": {"a long enough password"}}
	p = b.post("/admin/users", form)
	require.Equal(t, http.StatusUnauthorized, p.status, p.body)
	link, ok := p.testid("sso-button").Attr("href")
	require.True(t, ok)
	require.Equal(t, "/signin/sso?fresh=1&next=%2Fadmin%2Fusers", link)
	require.Zero(t, p.doc.Find("#reauth-password").Length(), "there is no password to ask for")

	p, _ = b.ssoSignIn(m, person("sub-jo", "jo@example.com", "arbiter-admins"), "/admin/users")
	require.Equal(t, "/admin/users", p.header.Get("Location"))
	b.get("/admin/users")
	form.Del("csrf_token") // the new session has its own
	p = b.post("/admin/users", form)
	require.Less(t, p.status, 400, p.body)
	_, err := accounts.New(st).UserByEmail(context.Background(), "kim@example.com")
	require.NoError(t, err)
}
