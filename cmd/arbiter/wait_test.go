package main_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services/dbtest"
)

// TestPreferWaitAcrossReplicas: an agent waits (Prefer: wait) on one serve
// process; an operator approves through another on the same PostgreSQL;
// the waiting request is answered proceed within a second of the decision.
func TestPreferWaitAcrossReplicas(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.PostgresURL(t)
	env := []string{"ARBITER_DATABASE_URL=" + dbURL}
	dir := t.TempDir()
	a := serve(t, dir, env, "--migrate")
	b := serve(t, dir, env)
	agent := createKey(t, dir, env, "--namespace", "payments", "--name", "refund-bot", "--role", "agent")
	createUser(t, dir, env, "alice@example.com", "operator")
	operator := createKey(t, dir, env, "--namespace", "payments", "--name", "ops-alice", "--role", "operator", "--owner", "alice@example.com")
	intent := `{"key":"refund:order-7","type":"intent","tool":"payments.refund","params":{"amount":1},"require_approval":true}`
	status, m := post(t, a.url+"/v1/entries", agent, intent)
	require.Equal(t, 202, status, "%v", m)
	id := m["action"].(map[string]any)["id"].(string)

	type answer struct {
		status int
		body   map[string]any
		at     time.Time
	}
	done := make(chan answer, 1)
	go func() {
		req, _ := http.NewRequest("POST", a.url+"/v1/entries", strings.NewReader(intent))
		req.Header.Set("Authorization", "Bearer "+agent)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Prefer", "wait=30")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- answer{}
			return
		}
		defer res.Body.Close()
		var body map[string]any
		_ = json.NewDecoder(res.Body).Decode(&body)
		done <- answer{res.StatusCode, body, time.Now()}
	}()
	time.Sleep(500 * time.Millisecond) // the agent is waiting on a
	status, m = post(t, b.url+"/v1/actions/"+id+"/decisions", operator, `{"decision":"approve"}`)
	require.Equal(t, 201, status, "%v", m)
	decided := time.Now()
	select {
	case got := <-done:
		require.Equal(t, 201, got.status, "%v", got.body)
		require.Equal(t, "proceed", got.body["outcome"])
		took := got.at.Sub(decided)
		t.Logf("the waiting agent was answered %v after the decision on the other replica", took.Round(time.Millisecond))
		require.Less(t, took, time.Second)
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting agent was not answered")
	}
}
