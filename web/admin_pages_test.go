package web_test

import (
	"bytes"
	"context"
	"maps"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/arbiter-ledger/arbiter/services/accounts"

	"github.com/PuerkitoBio/goquery"
	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
)

const hostile = `<script>alert(1)</script>"><img src=x onerror=alert(2)>`

// admin signs in a new admin and leaves the browser on an admin page, so
// its CSRF token is current.
func (e *env) admin(email string) *browser {
	e.t.Helper()
	b := e.browser()
	b.signIn(email, e.user(email, services.RoleAdmin))
	p := b.get("/admin/users")
	require.Equal(e.t, http.StatusOK, p.status, p.body)
	return b
}

func userID(t *testing.T, st *services.Store, email string) string {
	t.Helper()
	u, err := accounts.New(st).UserByEmail(context.Background(), email)
	require.NoError(t, err)
	return u.ID
}

// requireNoRawHostile checks hostile input never reaches the page as markup.
func requireNoRawHostile(t *testing.T, p page) {
	t.Helper()
	require.NotContains(t, p.body, "<script>alert(1)")
	require.NotContains(t, p.body, "<img src=x")
	require.Empty(t, p.doc.Find("img").Nodes)
	require.Empty(t, p.doc.Find("script:not([src])").Nodes)
}

func TestAdminRoutesAreForAdminsOnly(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		e.user("root@example.com", services.RoleAdmin)
		id := userID(t, st, "root@example.com")
		gets := []string{"/admin", "/admin/namespaces", "/admin/keys", "/admin/users"}
		posts := []string{"/admin/namespaces", "/admin/keys", "/admin/keys/some-id/revoke", "/admin/users",
			"/admin/users/" + id + "/role", "/admin/users/" + id + "/disable", "/admin/users/" + id + "/enable",
			"/admin/users/" + id + "/end-sessions"}
		form := url.Values{"name": {"payments"}, "role": {"viewer"}, "email": {"x@example.com"}, "password": {"long enough password"}}

		for _, role := range []services.Role{services.RoleOperator, services.RoleViewer} {
			email := string(role) + "@example.com"
			b := e.browser()
			b.signIn(email, e.user(email, role))
			for _, path := range gets {
				p := b.get(path)
				require.Equal(t, http.StatusForbidden, p.status, "%s GET %s", role, path)
				require.Contains(t, p.testid("error-page").Text(), "may not do this", "%s GET %s", role, path)
				require.NotEmpty(t, b.csrf, "the error page carries the session's token")
			}
			for _, path := range posts {
				p := b.post(path, maps.Clone(form)) // post adds this browser's token
				require.Equal(t, http.StatusForbidden, p.status, "%s POST %s", role, path)
				require.Contains(t, p.testid("error-page").Text(), "may not do this", "refused for the role, not the token")
			}
			p := b.get("/admin/users")
			require.Empty(t, p.doc.Find(`header a[href="/admin/namespaces"]`).Nodes, "no admin link for %s", role)
		}
		keys, err := accounts.NewKeys(st).Namespaces(context.Background())
		require.NoError(t, err)
		require.Empty(t, keys, "nothing was created")
		u, err := accounts.New(st).User(context.Background(), id)
		require.NoError(t, err)
		require.Equal(t, "admin", u.Role)
		require.Nil(t, u.DisabledAt)

		anon := e.browser()
		for _, path := range gets {
			p := anon.get(path)
			require.Equal(t, http.StatusSeeOther, p.status, path)
			require.Equal(t, "/signin?next="+url.QueryEscape(path), p.header.Get("Location"))
		}
		for _, path := range posts {
			p := anon.post(path, maps.Clone(form))
			require.Equal(t, http.StatusSeeOther, p.status, path)
			require.Equal(t, "/signin", p.header.Get("Location"))
		}
	})
}

func TestAdminNamespaces(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		b := e.admin("root@example.com")

		p := b.get("/admin")
		require.Equal(t, http.StatusSeeOther, p.status)
		require.Equal(t, "/admin/namespaces", p.header.Get("Location"))

		p = b.get("/admin/namespaces")
		require.Equal(t, http.StatusOK, p.status)
		require.Equal(t, "page", p.testid("admin-nav-namespaces").AttrOr("aria-current", ""))
		require.Equal(t, 6, p.testid("admin-nav").Find("a").Length(), "namespaces, keys, users, webhooks, approval policies, audit")
		require.Equal(t, 1, p.testid("namespaces-empty").Length())

		p = b.post("/admin/namespaces", url.Values{"name": {"payments"}})
		require.Equal(t, http.StatusSeeOther, p.status, p.body)
		require.Equal(t, "/admin/namespaces", p.header.Get("Location"))
		p = b.get("/admin/namespaces")
		require.Equal(t, "Created namespace payments.", p.testid("flash").Text())
		row := p.doc.Find(`[data-testid=namespace-row][data-namespace=payments]`)
		require.Equal(t, 1, row.Length())
		require.Equal(t, "0", row.Find(`[data-testid=namespace-keys]`).Text())
		require.Equal(t, "0", strings.TrimSpace(row.Find(`[data-testid=namespace-actions]`).Text()))
		require.NotEmpty(t, row.Find("time").AttrOr("datetime", ""))

		// Keys and actions are counted.
		agent := e.key("payments", "refund-bot", services.RoleAgent)
		e.key("payments", "old-bot", services.RoleAgent)
		_, err := accounts.NewKeys(st).RevokeKey(context.Background(), e.key("payments", "gone", services.RoleReader))
		require.NoError(t, err)
		status, body := e.do("POST", "/v1/entries", agent, `{"key":"refund:1","type":"intent","tool":"payments.refund","effect":"keyed"}`)
		require.Equal(t, http.StatusCreated, status, "%v", body)
		p = b.get("/admin/namespaces")
		row = p.doc.Find(`[data-testid=namespace-row][data-namespace=payments]`)
		require.Equal(t, "2", row.Find(`[data-testid=namespace-keys]`).Text(), "revoked keys are not counted")
		require.Equal(t, "1", strings.TrimSpace(row.Find(`[data-testid=namespace-actions]`).Text()))
		require.Equal(t, "/actions?namespace=payments", row.Find(`[data-testid=namespace-actions] a`).AttrOr("href", ""))

		p = b.post("/admin/namespaces", url.Values{"name": {"Bad Name"}})
		require.Equal(t, http.StatusBadRequest, p.status)
		require.Contains(t, p.testid("namespace-error").Text(), "must be 1 to 63 lowercase letters")
		require.Equal(t, "Bad Name", p.testid("namespace-form").Find("input[name=name]").AttrOr("value", ""))
		require.Equal(t, 1, p.testid("namespaces-table").Length(), "the page is whole")

		p = b.post("/admin/namespaces", url.Values{"name": {"payments"}})
		require.Equal(t, http.StatusConflict, p.status)
		require.Equal(t, `namespace "payments" exists already`, p.testid("namespace-error").Text())

		p = b.post("/admin/namespaces", url.Values{"name": {hostile}})
		require.Equal(t, http.StatusBadRequest, p.status)
		require.Contains(t, p.testid("namespace-error").Text(), "<script>alert(1)</script>")
		require.Equal(t, hostile, p.testid("namespace-form").Find("input[name=name]").AttrOr("value", ""))
		requireNoRawHostile(t, p)

		p = b.post("/admin/namespaces", url.Values{"name": {""}})
		require.Equal(t, http.StatusBadRequest, p.status)
	})
}

func TestAdminKeys(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		b := e.admin("root@example.com")

		p := b.get("/admin/keys")
		require.Equal(t, http.StatusOK, p.status)
		require.Equal(t, "page", p.testid("admin-nav-keys").AttrOr("aria-current", ""))
		require.Equal(t, 1, p.testid("keys-empty").Length())
		require.Empty(t, p.testid("new-api-key").Nodes)

		// A new namespace typed into the form is created with the key.
		p = b.post("/admin/keys", url.Values{"namespace": {"payments"}, "name": {"refund-bot"}, "role": {"agent"}})
		require.Equal(t, http.StatusCreated, p.status, p.body)
		require.Equal(t, "no-store", p.header.Get("Cache-Control"))
		require.Empty(t, p.header.Get("Location"))
		secret := p.testid("new-api-key").AttrOr("value", "")
		require.Regexp(t, `^ak_[0-9A-Za-z]{32}$`, secret)
		_, readonly := p.testid("new-api-key").Attr("readonly")
		require.True(t, readonly)
		panel := p.testid("new-api-key-panel")
		require.Contains(t, panel.Text(), "Store it now: it is shown only once.")
		require.Equal(t, "Authorization: Bearer "+secret, p.testid("new-api-key-header").Text())
		require.Equal(t, 1, strings.Count(p.body, `value="`+secret+`"`), "the key is in one field")
		row := p.doc.Find(`[data-testid=key-row]`)
		require.Equal(t, 1, row.Length())
		require.Equal(t, secret[:11]+"…", row.Find(`[data-testid=key-prefix]`).Text())
		require.NotContains(t, row.Text(), secret)

		status, _ := e.do("GET", "/v1/actions", secret, "")
		require.Equal(t, http.StatusOK, status, "the new key works on the API")

		p = b.get("/admin/namespaces")
		require.Equal(t, 1, p.doc.Find(`[data-testid=namespace-row][data-namespace=payments]`).Length())

		p = b.get("/admin/keys")
		require.NotContains(t, p.body, secret, "shown once only")
		require.Empty(t, p.testid("new-api-key").Nodes)
		row = p.doc.Find(`[data-testid=key-row][data-prefix="` + secret[:11] + `"]`)
		require.Equal(t, "refund-bot", row.Find(`[data-testid=key-name]`).Text())
		require.Equal(t, "agent", row.Find(`[data-testid=key-role]`).Text())
		require.Equal(t, "payments", strings.TrimSpace(row.Find(`[data-testid=key-namespace]`).Text()))
		require.Equal(t, "active", strings.TrimSpace(row.Find(`[data-testid=key-state] .status`).Text()))
		require.Equal(t, 1, p.doc.Find(`#key-namespace-options option[value=payments]`).Length(), "existing namespaces are offered")

		stored, err := accounts.NewKeys(st).ListKeys(context.Background())
		require.NoError(t, err)
		require.Len(t, stored, 1)
		require.Equal(t, secret[:11], stored[0].Prefix)
		for _, field := range []string{stored[0].ID, stored[0].Prefix, stored[0].Name, stored[0].Role, *stored[0].Namespace} {
			require.NotContains(t, field, secret)
		}
		require.False(t, bytes.Contains(stored[0].Hash, []byte(secret)), "only a hash is stored")

		// An admin key is global.
		p = b.post("/admin/keys", url.Values{"namespace": {""}, "name": {"ops-admin"}, "role": {"admin"}})
		require.Equal(t, http.StatusCreated, p.status, p.body)
		adminSecret := p.testid("new-api-key").AttrOr("value", "")
		row = p.doc.Find(`[data-testid=key-row][data-prefix="` + adminSecret[:11] + `"]`)
		require.Equal(t, "global", strings.TrimSpace(row.Find(`[data-testid=key-namespace]`).Text()))

		// Refusals re-render the form with the message and what was typed.
		for _, c := range []struct {
			form url.Values
			want string
		}{
			{url.Values{"namespace": {"payments"}, "name": {"x"}, "role": {"admin"}}, "an admin key is global"},
			{url.Values{"namespace": {""}, "name": {"x"}, "role": {"agent"}}, "needs a namespace"},
			{url.Values{"namespace": {"payments"}, "name": {""}, "role": {"agent"}}, "a key needs a name"},
			{url.Values{"namespace": {"payments"}, "name": {"x"}, "role": {"root"}}, "unknown role"},
			{url.Values{"namespace": {"Bad NS"}, "name": {"x"}, "role": {"agent"}}, "lowercase letters"},
		} {
			p = b.post("/admin/keys", c.form)
			require.Equal(t, http.StatusBadRequest, p.status, "%v", c.form)
			require.Contains(t, p.testid("key-error").Text(), c.want)
			require.Empty(t, p.testid("new-api-key").Nodes)
			require.Equal(t, c.form.Get("namespace"), p.testid("key-form").Find("input[name=namespace]").AttrOr("value", ""))
		}

		// Hostile names render as text.
		p = b.post("/admin/keys", url.Values{"namespace": {"payments"}, "name": {hostile}, "role": {"reader"}})
		require.Equal(t, http.StatusCreated, p.status, p.body)
		requireNoRawHostile(t, p)
		p = b.get("/admin/keys")
		requireNoRawHostile(t, p)
		require.Equal(t, 1, p.doc.Find(`[data-testid=key-name]`).FilterFunction(func(_ int, s *goquery.Selection) bool {
			return s.Text() == hostile
		}).Length())

		hostileRow := p.doc.Find(`[data-testid=key-row]`).FilterFunction(func(_ int, s *goquery.Selection) bool {
			return s.Find(`[data-testid=key-name]`).Text() == hostile
		})
		p = b.post(hostileRow.Find(`[data-testid=key-revoke] form`).AttrOr("action", ""), nil)
		require.Equal(t, http.StatusSeeOther, p.status)
		p = b.get("/admin/keys")
		require.Contains(t, p.testid("flash").Text(), hostile, "the notice names the key, as text")
		requireNoRawHostile(t, p)

		// Revoke, through the confirmation inside <details>.
		row = p.doc.Find(`[data-testid=key-row][data-prefix="` + secret[:11] + `"]`)
		form := row.Find(`[data-testid=key-revoke] form`)
		action := form.AttrOr("action", "")
		require.Equal(t, "/admin/keys/"+stored[0].ID+"/revoke", action)
		require.Equal(t, 1, form.Find(`[data-testid=key-revoke-submit]`).Length())
		p = b.post(action, nil)
		require.Equal(t, http.StatusSeeOther, p.status, p.body)
		require.Equal(t, "/admin/keys", p.header.Get("Location"))
		status, _ = e.do("GET", "/v1/actions", secret, "")
		require.Equal(t, http.StatusUnauthorized, status, "a revoked key stops working at once")
		status, _ = e.do("GET", "/v1/actions", adminSecret, "")
		require.Equal(t, http.StatusOK, status, "other keys still work")

		p = b.get("/admin/keys")
		require.Contains(t, p.testid("flash").Text(), "Revoked key "+secret[:11]+"… (refund-bot)")
		row = p.doc.Find(`[data-testid=key-row][data-prefix="` + secret[:11] + `"]`)
		require.Equal(t, "revoked", strings.TrimSpace(row.Find(`[data-testid=key-state] .status`).Text()))
		require.NotEmpty(t, row.Find(`[data-testid=key-state] time`).AttrOr("datetime", ""))
		require.Empty(t, row.Find(`[data-testid=key-revoke]`).Nodes, "nothing left to revoke")

		p = b.post("/admin/keys/no-such-key/revoke", nil)
		require.Equal(t, http.StatusNotFound, p.status)
		require.Contains(t, p.testid("admin-error").Text(), "no key has id or prefix")
	})
}

func TestAdminUsers(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		b := e.admin("root@example.com")
		p := b.get("/admin/users")
		require.Equal(t, "page", p.testid("admin-nav-users").AttrOr("aria-current", ""))
		require.Contains(t, p.testid("user-form").Text(), "12 to 256 characters", "the length rule is shown")

		const pw = "a long enough secret"
		p = b.post("/admin/users", url.Values{"email": {"Ops@Example.com"}, "role": {"viewer"}, "password": {pw}})
		require.Equal(t, http.StatusSeeOther, p.status, p.body)
		require.Equal(t, "/admin/users", p.header.Get("Location"))
		p = b.get("/admin/users")
		require.Contains(t, p.testid("flash").Text(), "Created viewer ops@example.com")
		row := p.doc.Find(`[data-testid=user-row][data-email="ops@example.com"]`)
		require.Equal(t, "viewer", row.Find(`[data-testid=user-role]`).Text())
		require.Equal(t, "active", strings.TrimSpace(row.Find(`[data-testid=user-state]`).Text()))

		ops := e.browser()
		ops.signIn("ops@example.com", pw)
		require.Equal(t, http.StatusForbidden, ops.get("/admin/users").status)

		// Refusals keep what was typed, except the password.
		p = b.post("/admin/users", url.Values{"email": {"ops@example.com"}, "role": {"operator"}, "password": {pw}})
		require.Equal(t, http.StatusConflict, p.status)
		require.Equal(t, `a user with email "ops@example.com" exists`, p.testid("user-error").Text())
		p = b.post("/admin/users", url.Values{"email": {"new@example.com"}, "role": {"operator"}, "password": {"short"}})
		require.Equal(t, http.StatusBadRequest, p.status)
		require.Equal(t, "a password must be 12 to 256 characters", p.testid("user-error").Text())
		require.Equal(t, "new@example.com", p.doc.Find("#user-email").AttrOr("value", ""))
		require.Equal(t, "operator", p.doc.Find("#user-role option[selected]").AttrOr("value", ""))
		require.Empty(t, p.doc.Find("#user-password").AttrOr("value", ""))
		require.NotContains(t, p.body, "short\"")
		p = b.post("/admin/users", url.Values{"email": {"x@example.com"}, "role": {"root"}, "password": {pw}})
		require.Equal(t, http.StatusBadRequest, p.status)
		require.Contains(t, p.testid("user-error").Text(), "unknown role")
		p = b.post("/admin/users", url.Values{"email": {hostile}, "role": {"viewer"}, "password": {pw}})
		require.Equal(t, http.StatusBadRequest, p.status)
		require.Contains(t, p.testid("user-error").Text(), "is not an email address")
		requireNoRawHostile(t, p)

		// A role change takes effect in the user's open session.
		id := userID(t, st, "ops@example.com")
		p = b.post("/admin/users/"+id+"/role", url.Values{"role": {"admin"}})
		require.Equal(t, http.StatusSeeOther, p.status, p.body)
		require.Equal(t, http.StatusOK, ops.get("/admin/users").status)
		p = b.get("/admin/users")
		require.Equal(t, "ops@example.com is now admin.", p.testid("flash").Text())
		p = b.post("/admin/users/"+id+"/role", url.Values{"role": {"operator"}})
		require.Equal(t, http.StatusSeeOther, p.status)
		require.Equal(t, http.StatusForbidden, ops.get("/admin/users").status)
		p = b.post("/admin/users/"+id+"/role", url.Values{"role": {"owner"}})
		require.Equal(t, http.StatusBadRequest, p.status)
		require.Contains(t, p.testid("admin-error").Text(), "unknown role")

		// Disable ends the open session and refuses sign-in.
		b.get("/admin/users")
		p = b.post("/admin/users/"+id+"/disable", nil)
		require.Equal(t, http.StatusSeeOther, p.status)
		p = ops.get("/actions")
		require.Equal(t, http.StatusSeeOther, p.status)
		require.True(t, strings.HasPrefix(p.header.Get("Location"), "/signin"))
		again := e.browser()
		again.get("/signin")
		p = again.post("/signin", url.Values{"email": {"ops@example.com"}, "password": {pw}})
		require.Equal(t, http.StatusUnauthorized, p.status)
		p = b.get("/admin/users")
		row = p.doc.Find(`[data-testid=user-row][data-email="ops@example.com"]`)
		require.Equal(t, "disabled", strings.TrimSpace(row.Find(`[data-testid=user-state] .status`).Text()))
		require.Equal(t, 1, row.Find(`[data-testid=user-enable]`).Length())
		require.Empty(t, row.Find(`[data-testid=user-disable]`).Nodes)

		p = b.post("/admin/users/"+id+"/enable", nil)
		require.Equal(t, http.StatusSeeOther, p.status)
		ops = e.browser()
		ops.signIn("ops@example.com", pw)

		// End sessions signs the user out everywhere.
		other := e.browser()
		other.signIn("ops@example.com", pw)
		b.get("/admin/users")
		p = b.post("/admin/users/"+id+"/end-sessions", nil)
		require.Equal(t, http.StatusSeeOther, p.status)
		require.Equal(t, http.StatusSeeOther, ops.get("/actions").status)
		require.Equal(t, http.StatusSeeOther, other.get("/actions").status)
		p = b.get("/admin/users")
		require.Equal(t, "Signed ops@example.com out everywhere.", p.testid("flash").Text())

		p = b.post("/admin/users/no-such-user/disable", nil)
		require.Equal(t, http.StatusNotFound, p.status)
		require.Equal(t, "no such user", p.testid("admin-error").Text())
	})
}

func TestAdminFormsCarryTheCSRFToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t, dbtest.Open(t, services.SQLite))
	b := e.admin("root@example.com")
	e.key("payments", "refund-bot", services.RoleAgent)
	e.user("ops@example.com", services.RoleOperator)
	for _, path := range []string{"/admin/namespaces", "/admin/keys", "/admin/users"} {
		p := b.get(path)
		forms := p.doc.Find(`main form`)
		require.Positive(t, forms.Length(), path)
		forms.Each(func(_ int, f *goquery.Selection) {
			require.Equal(t, "post", f.AttrOr("method", ""), path)
			require.Equal(t, b.csrf, f.Find(`input[name=csrf_token]`).AttrOr("value", ""), "%s %s", path, f.AttrOr("action", ""))
		})
		require.Empty(t, p.doc.Find("[style]").Nodes, "no inline styles")
		require.Empty(t, p.doc.Find("script:not([src])").Nodes, "no inline scripts")
		for _, attr := range []string{"onclick", "hx-on"} {
			require.NotContains(t, p.body, attr+"=")
		}
	}
	p := b.post("/admin/namespaces", url.Values{"name": {"payments"}, "csrf_token": {"forged"}})
	require.Equal(t, http.StatusForbidden, p.status)
}

func TestAdminCannotLockThemselvesOut(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		b := e.admin("root@example.com")
		me := userID(t, st, "root@example.com")

		p := b.get("/admin/users")
		row := p.doc.Find(`[data-testid=user-row][data-email="root@example.com"]`)
		require.Contains(t, row.Find(`[data-testid=user-email]`).Text(), "(you)")
		require.Empty(t, row.Find(`[data-testid=user-disable]`).Nodes, "no disable button on your own row")

		p = b.post("/admin/users/"+me+"/disable", nil)
		require.Equal(t, http.StatusBadRequest, p.status)
		require.Contains(t, p.testid("admin-error").Text(), "you cannot disable your own account")
		p = b.post("/admin/users/"+me+"/role", url.Values{"role": {"viewer"}})
		require.Equal(t, http.StatusBadRequest, p.status)
		require.Contains(t, p.testid("admin-error").Text(), "you cannot remove your own admin role")
		p = b.post("/admin/users/"+me+"/role", url.Values{"role": {"admin"}})
		require.Equal(t, http.StatusSeeOther, p.status, "keeping your own role is fine")

		p = b.get("/admin/users")
		require.Equal(t, http.StatusOK, p.status, "still an admin, still signed in")
		u, err := accounts.New(st).User(context.Background(), me)
		require.NoError(t, err)
		require.Equal(t, "admin", u.Role)
		require.Nil(t, u.DisabledAt)

		// Another admin can do it.
		other := e.admin("second@example.com")
		p = other.post("/admin/users/"+me+"/role", url.Values{"role": {"operator"}})
		require.Equal(t, http.StatusSeeOther, p.status)
		require.Equal(t, http.StatusForbidden, b.get("/admin/users").status)
	})
}
