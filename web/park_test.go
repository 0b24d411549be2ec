package web_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/accounts"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
	"github.com/arbiter-ledger/arbiter/web"
)

// parkIntent sends an intent held for approval with Prefer: wait=30 on a
// raw connection and returns it once the server holds the action.
func parkIntent(t *testing.T, e *env, agent, key string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.srv.URL, "http://"))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	body := `{"key":"` + key + `","type":"intent","tool":"payments.refund","params":{"amount":1},"require_approval":true}`
	fmt.Fprintf(conn, "POST /v1/entries HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nPrefer: wait=30\r\nContent-Length: %d\r\n\r\n%s", agent, len(body), body)
	return conn
}

// actionID waits until the action with key exists and returns its id.
func actionID(t *testing.T, e *env, reader, key string) string {
	t.Helper()
	for range 200 {
		status, m := e.do("GET", "/v1/actions?key="+key, reader, "")
		if status == 200 {
			return m["id"].(string)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("action %s never appeared", key)
	return ""
}

const heldIntent = `{"key":"%s","type":"intent","tool":"payments.refund","params":{"amount":1},"require_approval":true}`

// TestParkedClientThatLeftStartsNothing: a waiting client that hung up
// before the approval does not use it up: the approval starts no attempt,
// and the agent's next intent gets proceed with attempt 1.
func TestParkedClientThatLeftStartsNothing(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		agent := e.key("payments", "refund-bot", services.RoleAgent)
		e.user("alice@example.com", services.RoleOperator)
		alice := e.ownedKey("payments", "ops-alice", services.RoleOperator, "alice@example.com")
		conn := parkIntent(t, e, agent, "left")
		id := actionID(t, e, alice, "left")
		time.Sleep(100 * time.Millisecond) // parked
		conn.Close()
		time.Sleep(200 * time.Millisecond) // the server notices
		status, m := e.do("POST", "/v1/actions/"+id+"/decisions", alice, `{"decision":"approve"}`)
		require.Equal(t, 201, status, "%v", m)
		time.Sleep(500 * time.Millisecond) // what a release would have done by now
		status, m = e.do("POST", "/v1/entries", agent, fmt.Sprintf(heldIntent, "left"))
		require.Equal(t, 201, status, "%v", m)
		require.Equal(t, "proceed", m["outcome"])
		require.EqualValues(t, 1, m["attempt"])
	})
}

// TestParkedKeyRevokedStartsNothing: a key revoked while its request waited
// starts nothing on approval; the waiting client is refused, and the next
// intent (another key of the namespace) gets proceed with attempt 1.
func TestParkedKeyRevokedStartsNothing(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		k, agent, err := e.keys.CreateKey(context.Background(), accounts.CreateKeyRequest{Namespace: "payments", Name: "refund-bot", Role: services.RoleAgent})
		require.NoError(t, err)
		other := e.key("payments", "refund-bot-2", services.RoleAgent)
		e.user("alice@example.com", services.RoleOperator)
		alice := e.ownedKey("payments", "ops-alice", services.RoleOperator, "alice@example.com")
		conn := parkIntent(t, e, agent, "revoked")
		id := actionID(t, e, alice, "revoked")
		time.Sleep(100 * time.Millisecond)
		_, err = e.keys.RevokeKey(context.Background(), k.ID)
		require.NoError(t, err)
		status, m := e.do("POST", "/v1/actions/"+id+"/decisions", alice, `{"decision":"approve"}`)
		require.Equal(t, 201, status, "%v", m)
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		res, err := http.ReadResponse(bufio.NewReader(conn), nil)
		require.NoError(t, err)
		res.Body.Close()
		require.Equal(t, 401, res.StatusCode)
		status, m = e.do("POST", "/v1/entries", other, fmt.Sprintf(heldIntent, "revoked"))
		require.Equal(t, 201, status, "%v", m)
		require.Equal(t, "proceed", m["outcome"])
		require.EqualValues(t, 1, m["attempt"])
	})
}

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	return len(ents)
}

// TestParkedHangUpsFreeDescriptors: the sockets of waiting clients that
// hung up are closed at once, not when their wait passes.
func TestParkedHangUpsFreeDescriptors(t *testing.T) {
	var alone sync.Mutex // the descriptor table is the process's: one database at a time
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		alone.Lock()
		defer alone.Unlock()
		e := newEnv(t, st)
		agent := e.key("payments", "refund-bot", services.RoleAgent)
		e.user("alice@example.com", services.RoleOperator)
		alice := e.ownedKey("payments", "ops-alice", services.RoleOperator, "alice@example.com")
		before := openFDs(t)
		const n = 40
		conns := make([]net.Conn, n)
		for i := range conns {
			conns[i] = parkIntent(t, e, agent, fmt.Sprintf("fd-%d", i))
		}
		actionID(t, e, alice, fmt.Sprintf("fd-%d", n-1))
		time.Sleep(200 * time.Millisecond)
		parked := openFDs(t)
		require.GreaterOrEqual(t, parked, before+2*n, "parked: both ends open")
		for _, c := range conns {
			c.Close()
		}
		// The clients' ends close at once; the server's must follow within
		// a short time, long before the waits (30 s) pass.
		want := parked - n - n*3/4
		deadline := time.Now().Add(3 * time.Second)
		for openFDs(t) > want && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		require.LessOrEqual(t, openFDs(t), want, "descriptors of hung-up waiters still open")
	})
}

// TestMaxWaitersAnswersAtOnce: beyond ARBITER_MAX_WAITERS a request that
// asks to wait is answered at once, pending approval, with no
// Preference-Applied; once a waiter leaves, its place is free again.
func TestMaxWaitersAnswersAtOnce(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnvDeps(t, st, func(d *web.Deps) { d.MaxWaiters = 1 })
		agent := e.key("payments", "refund-bot", services.RoleAgent)
		e.user("alice@example.com", services.RoleOperator)
		alice := e.ownedKey("payments", "ops-alice", services.RoleOperator, "alice@example.com")
		conn := parkIntent(t, e, agent, "first")
		actionID(t, e, alice, "first")
		ask := func(key string) (*http.Response, time.Duration) {
			req, err := http.NewRequest("POST", e.srv.URL+"/v1/entries", strings.NewReader(fmt.Sprintf(heldIntent, key)))
			require.NoError(t, err)
			req.Header.Set("Authorization", "Bearer "+agent)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Prefer", "wait=2")
			start := time.Now()
			res, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			res.Body.Close()
			return res, time.Since(start)
		}
		res, took := ask("second")
		require.Equal(t, 202, res.StatusCode)
		require.Empty(t, res.Header.Get("Preference-Applied"))
		require.Less(t, took, time.Second)
		conn.Close()
		time.Sleep(300 * time.Millisecond)
		res, took = ask("third")
		require.Equal(t, 202, res.StatusCode)
		require.Equal(t, "wait=2", res.Header.Get("Preference-Applied"))
		require.GreaterOrEqual(t, took, 2*time.Second)
	})
}
