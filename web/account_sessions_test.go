package web_test

import (
	"context"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/models"
	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/accounts"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
)

// Item 2 of issue 15: people see their own sessions and end them.
func TestAccountSessionsListAndEnd(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		pw := e.user("dana@example.com", services.RoleViewer)
		var bs []*browser
		for range 3 {
			b := e.browser()
			b.signIn("dana@example.com", pw)
			bs = append(bs, b)
		}
		other := e.browser()
		other.signIn("erin@example.com", e.user("erin@example.com", services.RoleViewer))

		p := bs[0].get("/account/sessions")
		require.Equal(t, http.StatusOK, p.status)
		rows := p.testid("session-row")
		require.Equal(t, 3, rows.Length(), "their own sessions only")
		require.Equal(t, 1, p.testid("session-current").Length())
		require.Equal(t, "127.0.0.1", rows.First().Find(`[data-testid="session-address"]`).Text())
		require.Contains(t, rows.First().Find(`[data-testid="session-agent"]`).Text(), "Go-http-client")
		require.Equal(t, 2, p.testid("session-end").Length(), "the current one is ended by signing out")

		// Another user's session id is not found, and ends nothing.
		erin := other.get("/account/sessions").testid("session-row").First().AttrOr("data-id", "")
		require.NotEmpty(t, erin)
		require.Equal(t, http.StatusNotFound, bs[0].post("/account/sessions/"+erin+"/end", nil).status)
		require.Equal(t, http.StatusOK, other.get("/").status)

		// Ending one signs that browser out.
		bs[0].get("/account/sessions")
		target := p.doc.Find(`[data-testid="session-row"]:not(:has([data-testid="session-current"]))`).First().AttrOr("data-id", "")
		p = bs[0].post("/account/sessions/"+target+"/end", nil)
		require.Equal(t, http.StatusSeeOther, p.status, p.body)
		live := 0
		for _, b := range bs[1:] {
			if b.get("/").status == http.StatusOK {
				live++
			}
		}
		require.Equal(t, 1, live)

		// End all others: only this browser stays.
		bs[0].get("/account/sessions")
		p = bs[0].post("/account/sessions/end-others", nil)
		require.Equal(t, http.StatusSeeOther, p.status)
		for _, b := range bs[1:] {
			require.Equal(t, http.StatusSeeOther, b.get("/").status, "signed out")
		}
		p = bs[0].get("/account/sessions")
		require.Equal(t, 1, p.testid("session-row").Length())
		require.Equal(t, http.StatusOK, other.get("/").status, "another user's sessions are untouched")
	})
}

// Changing one's own password needs the current one and signs out every
// other session, not this one.
func TestChangeOwnPasswordEndsOtherSessions(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		pw := e.user("fay@example.com", services.RoleOperator)
		here, there := e.browser(), e.browser()
		here.signIn("fay@example.com", pw)
		there.signIn("fay@example.com", pw)
		here.get("/account/password")
		p := here.post("/account/password", url.Values{"current": {"not it at all"}, "password": {"a brand new password"}, "confirm": {"a brand new password"}})
		require.Equal(t, http.StatusBadRequest, p.status)
		require.Equal(t, http.StatusOK, there.get("/").status)
		p = here.post("/account/password", url.Values{"current": {pw}, "password": {"a brand new password"}, "confirm": {"a brand new password"}})
		require.Equal(t, http.StatusSeeOther, p.status, p.body)
		require.Equal(t, http.StatusOK, here.get("/").status)
		require.Equal(t, http.StatusSeeOther, there.get("/").status)
		e.browser().signIn("fay@example.com", "a brand new password")
	})
}

// The most sensitive admin changes ask for the password again once the
// session's was given more than ten minutes ago, carrying the change along.
func TestSensitiveAdminChangesNeedARecentPassword(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		admin := e.admin("root@example.com")
		rootPW := "correct horse battery admin"
		age := func() {
			err := st.GormWriter().Model(&models.Session{}).Where("user_id = ?", userID(t, st, "root@example.com")).
				Update("authenticated_at", time.Now().Add(-11*time.Minute)).Error
			require.NoError(t, err)
		}
		age()
		admin.get("/admin/users")

		// Creating a user: asked first, nothing made yet.
		create := url.Values{"email": {"gus@example.com"}, "role": {"operator"}, "namespace": {"*"}, "password": {"gus's long password"}}
		p := admin.post("/admin/users", create)
		require.Equal(t, http.StatusUnauthorized, p.status, p.body)
		require.Equal(t, 1, p.testid("reauth-form").Length())
		require.Equal(t, "/admin/users", p.testid("reauth-form").AttrOr("action", ""))
		_, err := accounts.New(st).UserByEmail(context.Background(), "gus@example.com")
		require.ErrorIs(t, err, services.ErrNotFound)
		carried := formValues(p.testid("reauth-form"))
		require.Equal(t, "gus@example.com", carried.Get("email"))

		carried.Set("reauth_password", "wrong password here")
		p = admin.post("/admin/users", carried)
		require.Equal(t, http.StatusForbidden, p.status)
		require.Contains(t, p.testid("reauth-error").Text(), "password is wrong")

		carried = formValues(p.testid("reauth-form"))
		carried.Set("reauth_password", rootPW)
		p = admin.post("/admin/users", carried)
		require.Equal(t, http.StatusSeeOther, p.status, p.body)
		_, err = accounts.New(st).UserByEmail(context.Background(), "gus@example.com")
		require.NoError(t, err)

		// Remembered in the session: the next one goes straight through.
		admin.get("/admin/keys")
		p = admin.post("/admin/keys", url.Values{"namespace": {""}, "name": {"root-key"}, "role": {"admin"}})
		require.Less(t, p.status, 400, p.body)
		require.Equal(t, 0, p.testid("reauth-form").Length())

		// Any key, a webhook URL and a role ask again once it is old
		// (every such change: TestEveryPermissionChangeNeedsARecentPassword).
		age()
		admin.get("/admin/keys")
		p = admin.post("/admin/keys", url.Values{"namespace": {"team-a"}, "name": {"bot"}, "role": {"agent"}})
		require.Equal(t, http.StatusUnauthorized, p.status, "an agent key too")
		admin.get("/admin/keys")
		p = admin.post("/admin/keys", url.Values{"namespace": {""}, "name": {"root-2"}, "role": {"admin"}})
		require.Equal(t, http.StatusUnauthorized, p.status)
		admin.get("/admin/webhooks/new")
		p = admin.post("/admin/webhooks", url.Values{"url": {"http://127.0.0.1:9/hook"}, "name": {"x"}})
		require.Equal(t, http.StatusUnauthorized, p.status)
		admin.get("/admin/users")
		p = admin.post("/admin/users/"+userID(t, st, "gus@example.com")+"/role", url.Values{"role": {"admin"}})
		require.Equal(t, http.StatusUnauthorized, p.status, "making an admin")
	})
}
