package main_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
)

// Webhooks through the real binary: alerts survive kill -9, two processes
// share the work without sending anything twice, and alerts arrive fast.

// hookReceiver counts what it is sent by webhook-id and checks every
// signature with the Standard Webhooks library.
type hookReceiver struct {
	t      *testing.T
	srv    *httptest.Server
	mu     sync.Mutex
	secret string
	status []int // answers in order, then 200
	got    []hookRequest
	bad    []string
}

type hookRequest struct {
	id   string
	at   time.Time
	body services.MessageBody
}

func newHookReceiver(t *testing.T, status ...int) *hookReceiver {
	r := &hookReceiver{t: t, status: status}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		at := time.Now()
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		defer r.mu.Unlock()
		wh, err := standardwebhooks.NewWebhook(r.secret)
		if err == nil {
			err = wh.Verify(body, req.Header)
		}
		var m services.MessageBody
		if err == nil {
			err = json.Unmarshal(body, &m)
		}
		if err != nil {
			r.bad = append(r.bad, err.Error())
		}
		r.got = append(r.got, hookRequest{id: req.Header.Get("webhook-id"), at: at, body: m})
		code := 200
		if len(r.status) > 0 {
			code, r.status = r.status[0], r.status[1:]
		}
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(code)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *hookReceiver) setSecret(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.secret = s
}

func (r *hookReceiver) requests() []hookRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]hookRequest(nil), r.got...)
}

// wait waits until the receiver got n requests, and checks each was signed.
func (r *hookReceiver) wait(n int, within time.Duration) []hookRequest {
	r.t.Helper()
	deadline := time.Now().Add(within)
	for len(r.requests()) < n && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	got := r.requests()
	require.GreaterOrEqual(r.t, len(got), n, "requests received within %s", within)
	r.mu.Lock()
	defer r.mu.Unlock()
	require.Empty(r.t, r.bad, "every message verifies and parses")
	return got
}

// createEndpoint subscribes the receiver through the API and gives it the
// secret.
func createEndpoint(t *testing.T, url, adminKey string, r *hookReceiver, events ...string) string {
	t.Helper()
	raw, _ := json.Marshal(map[string]any{"url": r.srv.URL + "/hook", "event_types": events})
	status, m := post(t, url+"/v1/webhooks", adminKey, string(raw))
	require.Equal(t, 201, status, "%v", m)
	r.setSecret(m["secret"].(string))
	return m["id"].(string)
}

func get(t *testing.T, url, key string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var m map[string]any
	require.NoError(t, json.Unmarshal(raw, &m), "%s", raw)
	return res.StatusCode, m
}

func dialectURL(t *testing.T, d services.Dialect) string {
	if d == services.Postgres {
		return dbtest.PostgresURL(t)
	}
	return dbtest.SQLiteURL(t)
}

// TestWebhookSurvivesKill9: an alert whose delivery failed once is
// delivered by the next process after kill -9, with the same webhook-id.
func TestWebhookSurvivesKill9(t *testing.T) {
	t.Parallel()
	for _, d := range dbtest.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			env := []string{"ARBITER_DATABASE_URL=" + dialectURL(t, d), "ARBITER_AUTO_MIGRATE=true",
				"ARBITER_WEBHOOK_ALLOW_PRIVATE=true"}
			p := serve(t, dir, env)
			adminKey := createKey(t, dir, env, "--name", "root", "--role", "admin")
			agent := createKey(t, dir, env, "--namespace", "payments", "--name", "refund-bot", "--role", "agent")
			rcv := newHookReceiver(t, 503)
			ep := createEndpoint(t, p.url, adminKey, rcv, "action.failed")

			status, m := post(t, p.url+"/v1/entries", agent, `{"entries":[
				{"key":"refund:1","type":"intent","tool":"payments.refund"},
				{"key":"refund:1","type":"failed","attempt":1,"error":"card declined"}]}`)
			require.Equal(t, 200, status, "%v", m)
			first := rcv.wait(1, 10*time.Second)[0]
			deadline := time.Now().Add(10 * time.Second)
			for {
				_, ds := get(t, p.url+"/v1/webhooks/"+ep+"/deliveries", adminKey)
				list := ds["deliveries"].([]any)
				if len(list) == 1 && list[0].(map[string]any)["attempt_count"].(float64) == 1 {
					break
				}
				require.True(t, time.Now().Before(deadline), "the failed attempt was never recorded")
				time.Sleep(5 * time.Millisecond)
			}
			p.kill() // SIGKILL between the failed attempt and the retry

			p = serve(t, dir, env)
			reqs := rcv.wait(2, 20*time.Second)
			require.Len(t, reqs, 2)
			require.Equal(t, first.id, reqs[1].id, "the same webhook-id after restart")
			require.Equal(t, "action.failed", string(reqs[1].body.Type))
			require.Equal(t, "refund:1", reqs[1].body.Data.Action.Key)
			var del map[string]any
			for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
				_, ds := get(t, p.url+"/v1/webhooks/"+ep+"/deliveries", adminKey)
				if del = ds["deliveries"].([]any)[0].(map[string]any); del["state"] == "succeeded" {
					break
				}
			}
			require.Equal(t, "succeeded", del["state"], "the success is recorded")
			require.Len(t, del["attempts"], 2)
		})
	}
}

// TestTwoServersDeliverEachMessageOnce: two serve processes on one
// PostgreSQL deliver 1,000 alerts, each exactly once.
func TestTwoServersDeliverEachMessageOnce(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.PostgresURL(t)
	env := []string{"ARBITER_DATABASE_URL=" + dbURL, "ARBITER_WEBHOOK_ALLOW_PRIVATE=true"}
	dir := t.TempDir()
	a := serve(t, dir, env, "--migrate")
	b := serve(t, dir, env)
	adminKey := createKey(t, dir, env, "--name", "root", "--role", "admin")
	agent := createKey(t, dir, env, "--namespace", "fleet", "--name", "worker", "--role", "agent")
	rcv := newHookReceiver(t)
	createEndpoint(t, a.url, adminKey, rcv, "action.failed")

	const n = 1000
	start := time.Now()
	for batch := range n / 250 {
		var sb strings.Builder
		sb.WriteString(`{"entries":[`)
		for i := batch * 250; i < (batch+1)*250; i++ {
			if i > batch*250 {
				sb.WriteString(",")
			}
			fmt.Fprintf(&sb, `{"key":"job:%d","type":"intent","tool":"jobs.run"},{"key":"job:%d","type":"failed","attempt":1,"error":"boom"}`, i, i)
		}
		sb.WriteString("]}")
		srv := []*proc{a, b}[batch%2] // both processes write, so both dispatchers are woken
		status, m := post(t, srv.url+"/v1/entries", agent, sb.String())
		require.Equal(t, 200, status, "%v", m)
	}
	rcv.wait(n, 60*time.Second)
	t.Logf("%d alerts delivered %s after the first entry", n, time.Since(start))
	time.Sleep(1500 * time.Millisecond) // room for a duplicate to show up
	reqs := rcv.requests()
	seen := map[string]int{}
	for _, r := range reqs {
		seen[r.id]++
	}
	require.Len(t, seen, n, "distinct webhook-ids")
	for id, c := range seen {
		require.Equal(t, 1, c, "%s was sent %d times", id, c)
	}
	require.Len(t, reqs, n)

	sa, sb := succeeded(t, a.url), succeeded(t, b.url)
	t.Logf("deliveries: %d by one process, %d by the other", sa, sb)
	require.Equal(t, n, sa+sb)
	require.Positive(t, sa)
	require.Positive(t, sb)
}

var succeededSeries = regexp.MustCompile(`(?m)^arbiter_webhook_deliveries_total\{result="succeeded"\} (\d+)$`)

// succeeded reads a process's count of successful deliveries from /metrics.
func succeeded(t *testing.T, url string) int {
	t.Helper()
	res, err := http.Get(url + "/metrics")
	require.NoError(t, err)
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	m := succeededSeries.FindSubmatch(raw)
	require.NotNil(t, m, "%s", raw)
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

// TestAlertsArriveFast: a timed-out action is delivered within 2 seconds of
// the sweep that timed it out, and an operator's decision is delivered with
// the decision, the reason and the operator.
func TestAlertsArriveFast(t *testing.T) {
	t.Parallel()
	for _, d := range dbtest.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			env := []string{"ARBITER_DATABASE_URL=" + dialectURL(t, d), "ARBITER_AUTO_MIGRATE=true",
				"ARBITER_WEBHOOK_ALLOW_PRIVATE=true", "ARBITER_SWEEP_INTERVAL=200ms"}
			p := serve(t, dir, env)
			adminKey := createKey(t, dir, env, "--name", "root", "--role", "admin")
			agent := createKey(t, dir, env, "--namespace", "payments", "--name", "refund-bot", "--role", "agent")
			operator := createKey(t, dir, env, "--namespace", "payments", "--name", "ops-alice", "--role", "operator")
			rcv := newHookReceiver(t)
			createEndpoint(t, p.url, adminKey, rcv, "action.timed_out", "action.decided")

			status, m := post(t, p.url+"/v1/entries", agent, `{"key":"refund:8812","type":"intent","tool":"payments.refund","timeout":1}`)
			require.Equal(t, 201, status, "%v", m)
			timedOut := rcv.wait(1, 10*time.Second)[0]
			require.Equal(t, "action.timed_out", string(timedOut.body.Type))
			sweptAt := timedOut.body.Data.Entry.RecordedAt
			lag := timedOut.at.Sub(sweptAt)
			t.Logf("action.timed_out arrived %s after the sweep", lag)
			require.Less(t, lag, 2*time.Second)
			require.Equal(t, "timed_out", string(timedOut.body.Data.Action.Status))

			id := timedOut.body.Data.Action.ID
			status, m = post(t, p.url+"/v1/actions/"+id+"/decisions", operator,
				`{"decision":"abandon","reason":"The customer cancelled; no refund was made."}`)
			require.Equal(t, 201, status, "%v", m)
			decided := rcv.wait(2, 10*time.Second)[1]
			require.Equal(t, "action.decided", string(decided.body.Type))
			require.Equal(t, &services.DecisionInfo{Decision: "abandon",
				Reason: "The customer cancelled; no refund was made.", Operator: "ops-alice"}, decided.body.Data.Decision)
			require.Equal(t, "abandoned", string(decided.body.Data.Action.Status))
			require.Less(t, decided.at.Sub(decided.body.Timestamp), 2*time.Second)
			require.NotEqual(t, timedOut.id, decided.id)
		})
	}
}
