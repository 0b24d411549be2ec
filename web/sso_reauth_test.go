package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/oauth2-proxy/mockoidc"
	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/accounts"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
)

// signedInAt is a provider's user whose ID token says they authenticated
// at the provider at a given time (auth_time), as a provider does when it
// signs someone in from a session of its own.
type signedInAt struct {
	*mockoidc.MockUser
	at time.Time
}

func (u signedInAt) Claims(scope []string, base *mockoidc.IDTokenClaims) (jwt.Claims, error) {
	c, err := u.MockUser.Claims(scope, base)
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	m := jwt.MapClaims{}
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	m["auth_time"] = u.at.Unix()
	return m, nil
}

// throughProvider follows a link to /signin/sso as who, and returns the
// authorization URL it sent the browser to and the callback's answer.
func (b *browser) throughProvider(m *mockoidc.MockOIDC, who mockoidc.User, link string) (url.Values, page) {
	b.t.Helper()
	m.QueueUser(who)
	start := b.get(link)
	require.Equal(b.t, http.StatusSeeOther, start.status, start.body)
	auth := start.header.Get("Location")
	back := b.getURL(auth)
	require.Equal(b.t, http.StatusFound, back.status, back.body)
	return mustQuery(b.t, auth), b.getURL(back.header.Get("Location"))
}

// TestSSOReauthNeedsAFreshLoginAtTheProvider: a single sign-on the provider
// made from a session of its own long ago (auth_time) does not count as a
// recent sign-in; the prompt's link asks the provider to authenticate the
// person again (prompt=login, max_age=0), and only a sign-in the provider
// says is recent lets the change through.
func TestSSOReauthNeedsAFreshLoginAtTheProvider(t *testing.T) {
	t.Parallel()
	st := dbtest.Open(t, services.SQLite)
	m := startProvider(t, nil)
	e := newSSOEnv(t, st, m, true)
	jo := person("sub-jo", "jo@example.com", "arbiter-admins")
	b := e.browser()
	_, p := b.throughProvider(m, signedInAt{jo, time.Now().Add(-time.Hour)}, "/signin/sso?next=%2Fadmin%2Fusers")
	require.Equal(t, http.StatusSeeOther, p.status, p.body)
	require.NotNil(t, b.sessionCookie())
	b.get("/admin/users")

	form := url.Values{"email": {"kim@example.com"}, "role": {"viewer"}, "password": {"a long enough password"}}
	created := func() bool {
		_, err := accounts.New(st).UserByEmail(context.Background(), "kim@example.com")
		return err == nil
	}
	p = b.post("/admin/users", form)
	require.Equal(t, http.StatusUnauthorized, p.status, "a pass-through sign-in of an hour-old login is not recent: %s", p.body)
	require.False(t, created())
	link := p.testid("sso-button").AttrOr("href", "")
	require.True(t, strings.HasPrefix(link, "/signin/sso?"), link)
	require.Equal(t, "1", mustQuery(t, link).Get("fresh"))

	// A provider that passes the person through anyway: still asked.
	q, p := b.throughProvider(m, signedInAt{jo, time.Now().Add(-time.Hour)}, link)
	require.Equal(t, "login", q.Get("prompt"))
	require.Equal(t, "0", q.Get("max_age"))
	require.Equal(t, "/admin/users", p.header.Get("Location"))
	b.get("/admin/users")
	form.Del("csrf_token")
	p = b.post("/admin/users", form)
	require.Equal(t, http.StatusUnauthorized, p.status, p.body)
	require.False(t, created())

	// The person signs in at the provider again: the change goes through.
	_, p = b.throughProvider(m, signedInAt{jo, time.Now()}, link)
	require.Equal(t, "/admin/users", p.header.Get("Location"))
	b.get("/admin/users")
	form.Del("csrf_token")
	p = b.post("/admin/users", form)
	require.Less(t, p.status, 400, p.body)
	require.True(t, created())
}
