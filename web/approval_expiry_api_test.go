package web_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
)

// pastExpiry moves an action's approval expiry into the past in the
// database, as time passing would; no sweeper runs in these servers.
func pastExpiry(t *testing.T, st *services.Store, id string) {
	t.Helper()
	var raw string
	require.NoError(t, st.Gorm().Raw("SELECT approval FROM actions WHERE id = ?", id).Scan(&raw).Error)
	var ap map[string]any
	require.NoError(t, json.Unmarshal([]byte(raw), &ap))
	past := time.Now().UTC().Add(-10 * time.Second)
	ap["expires_at"] = past.Format(time.RFC3339Nano)
	b, err := json.Marshal(ap)
	require.NoError(t, err)
	require.NoError(t, st.GormWriter().Exec("UPDATE actions SET approval = ?, deadline = ? WHERE id = ?", string(b), past, id).Error)
}

// TestApprovalExpiryOverHTTPWithoutTheSweeper: after expires_at, an
// approve is answered 409 approval_expired and an intent (held, or after
// an approval) is denied, at the time it is sent, not at the sweeper's
// next run.
func TestApprovalExpiryOverHTTPWithoutTheSweeper(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		agent := e.key("payments", "refund-bot", services.RoleAgent)
		e.user("alice@example.com", services.RoleOperator)
		alice := e.ownedKey("payments", "ops-alice", services.RoleOperator, "alice@example.com")
		hold := func(key string) string {
			t.Helper()
			status, m := e.do("POST", "/v1/entries", agent, fmt.Sprintf(heldIntent, key))
			require.Equal(t, 202, status, "%v", m)
			return m["action"].(map[string]any)["id"].(string)
		}
		requireDenied := func(m map[string]any) {
			t.Helper()
			require.Equal(t, "denied", m["outcome"], "%v", m)
			a := m["action"].(map[string]any)
			require.Equal(t, "denied", a["status"])
			require.EqualValues(t, 0, a["attempt"], "no attempt started")
		}

		// Approving too late.
		id := hold("late-approve")
		pastExpiry(t, st, id)
		status, m := e.do("POST", "/v1/actions/"+id+"/decisions", alice, `{"decision":"approve"}`)
		require.Equal(t, 409, status, "%v", m)
		require.Equal(t, "approval_expired", errCode(m))
		status, m = e.do("GET", "/v1/actions/"+id, alice, "")
		require.Equal(t, 200, status)
		require.Equal(t, "denied", m["status"])
		require.Empty(t, m["approval"].(map[string]any)["approvals"], "the late approval is not counted")

		// The intent again while it still awaits approval.
		id = hold("late-intent")
		pastExpiry(t, st, id)
		status, m = e.do("POST", "/v1/entries", agent, fmt.Sprintf(heldIntent, "late-intent"))
		require.Equal(t, 409, status, "%v", m)
		requireDenied(m)

		// Approved in time, but the agent comes back after expires_at.
		id = hold("late-proceed")
		status, m = e.do("POST", "/v1/actions/"+id+"/decisions", alice, `{"decision":"approve"}`)
		require.Equal(t, 201, status, "%v", m)
		pastExpiry(t, st, id)
		status, m = e.do("POST", "/v1/entries", agent, fmt.Sprintf(heldIntent, "late-proceed"))
		require.Equal(t, 409, status, "%v", m)
		requireDenied(m)
	})
}
