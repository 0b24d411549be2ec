package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/models"
	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/accounts"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
	"github.com/arbiter-ledger/arbiter/services/record"
)

// TestEveryPermissionChangeNeedsARecentPassword: each dashboard change of
// who may do what (keys, users, roles, memberships, sessions) or of what
// holds actions and tells people (approval policies, webhook endpoints),
// made from a session whose password was given more than
// accounts.ReauthAfter ago, is answered with the password prompt and
// changes nothing; the same form sent again with the password makes it.
func TestEveryPermissionChangeNeedsARecentPassword(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		ctx := context.Background()
		e := newEnv(t, st)
		b := e.admin("root@example.com")
		rootPW := "correct horse battery admin"
		rootID := userID(t, st, "root@example.com")
		setAuthenticated := func(at time.Time) {
			t.Helper()
			require.NoError(t, st.GormWriter().Model(&models.Session{}).Where("user_id = ?", rootID).
				Update("authenticated_at", at).Error)
		}
		db := st.Gorm()
		count := func(model any, where string, args ...any) int64 {
			t.Helper()
			var n int64
			require.NoError(t, db.Model(model).Where(where, args...).Count(&n).Error)
			return n
		}

		// What the cases act on, made while the session is fresh.
		keyID := func(name string) string {
			t.Helper()
			var k models.APIKey
			require.NoError(t, db.Where("name = ?", name).First(&k).Error)
			return k.ID
		}
		e.key("team-a", "doomed-bot", services.RoleAgent)
		e.user("vic@example.com", services.RoleViewer)
		vic := userID(t, st, "vic@example.com")
		require.NoError(t, accounts.New(st).Grant(ctx, vic, "team-a", services.RoleViewer))
		vicPW := "correct horse battery viewer"
		e.browser().signIn("vic@example.com", vicPW)
		e.user("wes@example.com", services.RoleViewer)
		wes := userID(t, st, "wes@example.com")
		require.NoError(t, st.GormWriter().Model(&models.User{}).Where("id = ?", wes).Update("disabled_at", time.Now()).Error)

		p := b.createWebhook("http://127.0.0.1:9/hook", []record.EventType{record.EventTimedOut}, "", "ops")
		require.Equal(t, http.StatusCreated, p.status, p.body)
		hook := strings.TrimPrefix(p.doc.Find(`form[data-testid="webhook-edit-form"]`).AttrOr("action", ""), "/admin/webhooks/")
		secretOf := func() string {
			var ep models.WebhookEndpoint
			require.NoError(t, db.Where("id = ?", hook).First(&ep).Error)
			return ep.Secret
		}
		firstSecret := secretOf()
		policy := url.Values{"name": {"large refunds"}, "namespace": {"team-a"}, "tools": {"payments.*"},
			"condition": {"params.amount > 100000"}, "approvals_required": {"2"}, "expires_after": {"3600"},
			"escalate_after": {""}, "enabled": {"true"}, "do": {"save"}}
		b.get("/admin/policies")
		p = b.post("/admin/policies", policy)
		require.Equal(t, http.StatusSeeOther, p.status, p.body)
		pol := strings.TrimPrefix(p.header.Get("Location"), "/admin/policies/")
		policyRow := func() models.Policy {
			var m models.Policy
			require.NoError(t, db.Where("id = ?", pol).First(&m).Error)
			return m
		}
		edited := func(set map[string]string) url.Values {
			v := url.Values{}
			for k, vs := range policy {
				v[k] = vs
			}
			v.Del("namespace")
			for k, s := range set {
				v.Set(k, s)
			}
			return v
		}

		for _, tc := range []struct {
			name    string
			page    string // where the form is
			path    string
			form    url.Values
			changed func() bool
		}{
			{"mint an agent key", "/admin/keys", "/admin/keys",
				url.Values{"namespace": {"team-a"}, "name": {"new-agent"}, "role": {"agent"}},
				func() bool { return count(&models.APIKey{}, "name = ?", "new-agent") == 1 }},
			{"mint an operator key", "/admin/keys", "/admin/keys",
				url.Values{"namespace": {"team-a"}, "name": {"new-operator"}, "role": {"operator"}},
				func() bool { return count(&models.APIKey{}, "name = ?", "new-operator") == 1 }},
			{"revoke a key", "/admin/keys", "/admin/keys/" + keyID("doomed-bot") + "/revoke", url.Values{},
				func() bool { return count(&models.APIKey{}, "name = ? AND revoked_at IS NOT NULL", "doomed-bot") == 1 }},
			{"take a membership away", "/admin/users", "/admin/users/" + vic + "/memberships/revoke",
				url.Values{"namespace": {"team-a"}},
				func() bool { return count(&models.Membership{}, "user_id = ? AND namespace = ?", vic, "team-a") == 0 }},
			{"end a user's sessions", "/admin/users", "/admin/users/" + vic + "/end-sessions", url.Values{},
				func() bool { return count(&models.Session{}, "user_id = ?", vic) == 0 }},
			{"disable a user", "/admin/users", "/admin/users/" + vic + "/disable", url.Values{},
				func() bool { return count(&models.User{}, "id = ? AND disabled_at IS NOT NULL", vic) == 1 }},
			{"enable a user", "/admin/users", "/admin/users/" + wes + "/enable", url.Values{},
				func() bool { return count(&models.User{}, "id = ? AND disabled_at IS NULL", wes) == 1 }},
			{"change a webhook's URL", "/admin/webhooks/" + hook, "/admin/webhooks/" + hook,
				url.Values{"edit": {"settings"}, "url": {"http://127.0.0.1:9/elsewhere"}, "event_types": {string(record.EventTimedOut)},
					"format": {"standard"}},
				func() bool {
					return count(&models.WebhookEndpoint{}, "id = ? AND url = ?", hook, "http://127.0.0.1:9/elsewhere") == 1
				}},
			{"switch a webhook off", "/admin/webhooks/" + hook, "/admin/webhooks/" + hook, url.Values{"enabled": {"false"}},
				func() bool { return count(&models.WebhookEndpoint{}, "id = ? AND enabled = ?", hook, false) == 1 }},
			{"rotate a webhook's secret", "/admin/webhooks/" + hook, "/admin/webhooks/" + hook + "/rotate", url.Values{},
				func() bool { return secretOf() != firstSecret }},
			{"weaken a policy", "/admin/policies/" + pol, "/admin/policies/" + pol,
				edited(map[string]string{"approvals_required": "1"}),
				func() bool { return policyRow().ApprovalsRequired == 1 }},
			{"disable a policy", "/admin/policies/" + pol, "/admin/policies/" + pol,
				edited(map[string]string{"approvals_required": "1", "enabled": "false"}),
				func() bool { return !policyRow().Enabled }},
			{"create a policy", "/admin/policies", "/admin/policies",
				func() url.Values {
					v := edited(map[string]string{"name": "another"})
					v.Set("namespace", "team-a")
					return v
				}(),
				func() bool { return count(&models.Policy{}, "name = ?", "another") == 1 }},
			{"delete a policy", "/admin/policies/" + pol, "/admin/policies/" + pol + "/delete", url.Values{},
				func() bool { return policyRow().DeletedAt != nil }},
			{"delete a webhook endpoint", "/admin/webhooks/" + hook, "/admin/webhooks/" + hook + "/delete",
				url.Values{"confirm": {"yes"}},
				func() bool { return count(&models.WebhookEndpoint{}, "id = ?", hook) == 0 }},
		} {
			t.Run(tc.name, func(t *testing.T) {
				setAuthenticated(time.Now().Add(-accounts.ReauthAfter - time.Minute))
				require.Equal(t, http.StatusOK, b.get(tc.page).status)
				form := url.Values{}
				for k, v := range tc.form {
					form[k] = v
				}
				p := b.post(tc.path, form)
				require.Equal(t, http.StatusUnauthorized, p.status, p.body)
				require.Equal(t, 1, p.testid("reauth-form").Length(), p.body)
				require.Equal(t, tc.path, p.testid("reauth-form").AttrOr("action", ""))
				require.False(t, tc.changed(), "a stale session changes nothing")

				carried := formValues(p.testid("reauth-form"))
				carried.Set("reauth_password", rootPW)
				p = b.post(tc.path, carried)
				require.Less(t, p.status, 400, p.body)
				if p.doc != nil {
					require.Zero(t, p.testid("reauth-form").Length())
				}
				require.True(t, tc.changed(), "with the password given, the change is made")
			})
		}

		// Trying a policy against past intents changes nothing: it does not ask.
		setAuthenticated(time.Now().Add(-accounts.ReauthAfter - time.Minute))
		b.get("/admin/policies")
		try := edited(map[string]string{"name": "only tried", "do": "test"})
		try.Set("namespace", "team-a")
		p = b.post("/admin/policies", try)
		require.Equal(t, http.StatusOK, p.status, p.body)
		require.Zero(t, p.testid("reauth-form").Length())
		require.Zero(t, count(&models.Policy{}, "name = ?", "only tried"))
	})
}
