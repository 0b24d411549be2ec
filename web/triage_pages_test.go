package web_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
)

const (
	hostileKey = `<script>alert(1)</script>`
	hostileRef = `"><img src=x onerror=alert(1)>`
)

// queueEnv drives the API as agents and an operator of one namespace would,
// to bring actions into the states the triage page shows.
type queueEnv struct {
	*env
	agent, operator string
}

func newQueueEnv(t *testing.T, st *services.Store, ns string) *queueEnv {
	e := newEnv(t, st)
	return &queueEnv{env: e, agent: e.key(ns, "refund-bot", services.RoleAgent), operator: e.key(ns, "ops", services.RoleOperator)}
}

// send submits one entry as the agent and returns the answer's action id.
func (q *queueEnv) send(entry string) string {
	q.t.Helper()
	status, m := q.do("POST", "/v1/entries", q.agent, entry)
	require.Less(q.t, status, 500, "%v", m)
	a, _ := m["action"].(map[string]any)
	require.NotNil(q.t, a, "no action in %v", m)
	return a["id"].(string)
}

func (q *queueEnv) intent(key, tool, ref string, timeout int) string {
	q.t.Helper()
	return q.send(fmt.Sprintf(`{"key":%q,"type":"intent","tool":%q,"effect":"keyed","reference":%q,"params":{"n":1},"timeout":%d}`,
		key, tool, ref, timeout))
}

func (q *queueEnv) decide(id, decision string) {
	q.t.Helper()
	status, m := q.do("POST", "/v1/actions/"+id+"/decisions", q.operator, fmt.Sprintf(`{"decision":%q,"reason":"test"}`, decision))
	require.Equal(q.t, http.StatusCreated, status, "%v", m)
}

// timeOut starts an action with a one-second lease, waits for it to pass
// and runs the sweeper.
func (q *queueEnv) timeOut(key, ref string) string {
	q.t.Helper()
	id := q.intent(key, "payments.refund", ref, 1)
	time.Sleep(1100 * time.Millisecond)
	n, err := services.NewLedger(q.st, services.LedgerConfig{}).Sweep(context.Background())
	require.NoError(q.t, err)
	require.Equal(q.t, 1, n)
	return id
}

// fillQueue makes one action of every kind the queue lists, oldest first,
// and one it does not list. It returns the listed ids in queue order.
func (q *queueEnv) fillQueue() []string {
	q.t.Helper()
	timedOut := q.timeOut(hostileKey, hostileRef)
	retry := q.intent("retry", "payments.refund", "order-2", 60)
	q.send(`{"key":"retry","type":"failed","attempt":1,"error":"declined"}`)
	q.decide(retry, "retry")
	comp := q.intent("comp", "payments.refund", "order-3", 60)
	q.send(`{"key":"comp","type":"succeeded","attempt":1}`)
	q.decide(comp, "compensate")
	reused := q.intent("reused", "payments.refund", "order-4", 60)
	q.send(`{"key":"reused","type":"succeeded","attempt":1}`)
	q.send(`{"key":"reused","type":"intent","tool":"payments.charge","effect":"keyed","params":{"n":2}}`)
	q.intent("running", "payments.refund", "order-5", 60)
	return []string{timedOut, retry, comp, reused}
}

func rowAttrs(rows *goquery.Selection, attr string) []string {
	var out []string
	rows.Each(func(_ int, s *goquery.Selection) { out = append(out, s.AttrOr(attr, "")) })
	return out
}

func countOf(p page, name string) string {
	return strings.TrimSpace(p.testid("count-" + name).Find(".n").Text())
}

func TestTriageQueue(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		q := newQueueEnv(t, st, "shop")
		ids := q.fillQueue()
		b := q.browser()
		b.signIn("viewer@example.com", q.user("viewer@example.com", services.RoleViewer))

		p := b.get("/")
		require.Equal(t, http.StatusOK, p.status)
		rows := p.testid("triage-row")
		require.Equal(t, ids, rowAttrs(rows, "data-action-id"), "oldest first")
		require.Equal(t, []string{"timed_out", "retry_requested", "compensation_requested", "key_reused"}, rowAttrs(rows, "data-kind"))

		first := rows.First()
		require.Equal(t, hostileKey, first.Find(`[data-testid="triage-key"]`).Text())
		require.Equal(t, "/actions/"+ids[0], first.Find(`[data-testid="triage-key"]`).AttrOr("href", ""))
		require.Equal(t, hostileRef, first.Find(`[data-testid="triage-reference"]`).Text())
		require.Equal(t, "shop", first.Find(`[data-testid="triage-namespace"]`).Text())
		require.Equal(t, "payments.refund", first.Find(`[data-testid="triage-tool"]`).Text())
		require.Equal(t, "by refund-bot", first.Find(`[data-testid="triage-agent"]`).Text(), "the agent that wrote the intent")
		require.Equal(t, "n 1", first.Find(`[data-testid="triage-summary"]`).Text(), "what the params are about")
		require.Equal(t, "keyed", first.Find(`[data-testid="triage-effect"]`).Text())
		require.Equal(t, "1", first.Find(`[data-testid="triage-attempt"]`).Text())
		require.Equal(t, "timed_out", strings.TrimSpace(first.Find(`[data-testid="triage-kind"] .status`).Text()))
		since := first.Find(`[data-testid="triage-since"] time`)
		abs, _ := since.Attr("datetime")
		_, err := time.Parse(time.RFC3339, abs)
		require.NoError(t, err, "absolute time %q", abs)
		require.Equal(t, abs, since.AttrOr("title", ""))
		require.Regexp(t, `^(just now|\d+ s ago)$`, since.Text(), "relative to the server's time")

		alert := rows.Eq(3).Find(`[data-testid="triage-kind"]`)
		require.Equal(t, "key reused", alert.Find(".alert").Text())
		require.Equal(t, "succeeded", alert.Find(".status").Text(), "the action's status beside the alert")

		for name, want := range map[string]string{"timed_out": "1", "retry_requested": "1", "compensation_requested": "1",
			"in_progress": "1", "key_reused": "1", "stale_outcome": "0", "total": "4"} {
			require.Equal(t, want, countOf(p, name), "count of %s", name)
		}
		require.Zero(t, p.testid("count-succeeded").Length(), "finished statuses are not counted on triage")
		require.Equal(t, "/actions?status=timed_out", p.testid("count-timed_out").AttrOr("href", ""))
		require.True(t, p.testid("count-timed_out").HasClass("attention"))
		require.False(t, p.testid("count-in_progress").HasClass("attention"))

		require.Equal(t, "/", p.testid("triage-refresh").AttrOr("href", ""), "a refresh link works without JavaScript")
		live := p.testid("triage-live")
		require.Equal(t, "/triage/items", live.AttrOr("hx-get", ""))
		require.Equal(t, "sse:triage", live.AttrOr("hx-trigger", ""))
		require.True(t, strings.HasPrefix(p.testid("triage").AttrOr("sse-connect", ""), "/triage/events?stamp="))

		require.NotContains(t, p.body, "<script>alert(1)")
		require.NotContains(t, p.body, "<img src=x")
		require.Contains(t, p.body, "&lt;script&gt;alert(1)&lt;/script&gt;")
		require.Empty(t, p.doc.Find("img").Nodes)

		// The fragment live updates fetch: the counts and the queue alone.
		for _, hx := range []bool{false, true} {
			req, err := http.NewRequest("GET", q.srv.URL+"/triage/items", nil)
			require.NoError(t, err)
			if hx {
				req.Header.Set("HX-Request", "true")
			}
			f := b.do(req)
			require.Equal(t, http.StatusOK, f.status)
			require.NotContains(t, f.body, "<html")
			require.NotContains(t, f.body, "<nav aria-label=\"Main\"")
			require.Equal(t, 1, f.testid("triage-items").Length())
			require.Equal(t, ids, rowAttrs(f.testid("triage-row"), "data-action-id"))
			require.Equal(t, "4", countOf(f, "total"))
			require.NotContains(t, f.body, "<script>alert(1)")
		}
	})
}

func TestTriageEmptyAndSignedOut(t *testing.T) {
	t.Parallel()
	e := newEnv(t, dbtest.Open(t, services.SQLite))
	for _, path := range []string{"/", "/triage/items", "/triage/events", "/actions?status=timed_out"} {
		p := e.browser().get(path)
		require.Equal(t, http.StatusSeeOther, p.status, path)
		require.Equal(t, "/signin?next="+url.QueryEscape(path), p.header.Get("Location"))
	}
	b := e.browser()
	b.signIn("ops@example.com", e.user("ops@example.com", services.RoleOperator))
	p := b.get("/")
	require.Equal(t, http.StatusOK, p.status)
	require.Equal(t, "Nothing needs a person right now.", p.testid("triage-empty").Text())
	require.Zero(t, p.testid("triage-row").Length())
	require.Equal(t, "0", countOf(p, "total"))
}

// sseStream reads a server-sent event stream line by line.
type sseStream struct {
	lines chan string
	res   *http.Response
}

func openStream(t *testing.T, b *browser, path, lastEventID string) *sseStream {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, "GET", b.e.srv.URL+path, nil)
	require.NoError(t, err)
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	res, err := b.client.Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { res.Body.Close() })
	require.Equal(t, http.StatusOK, res.StatusCode)
	s := &sseStream{lines: make(chan string, 100), res: res}
	go func() {
		defer close(s.lines)
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			s.lines <- sc.Text()
		}
	}()
	return s
}

// next returns the next line that starts with prefix, failing the test if
// none arrives within d or an event arrives first.
func (s *sseStream) next(t *testing.T, prefix string, d time.Duration) string {
	t.Helper()
	deadline := time.After(d)
	for {
		select {
		case l, ok := <-s.lines:
			require.True(t, ok, "the stream ended before %q", prefix)
			if strings.HasPrefix(l, prefix) {
				return l
			}
			require.False(t, strings.HasPrefix(l, "event:"), "unexpected %q while waiting for %q", l, prefix)
		case <-deadline:
			t.Fatalf("no %q within %s", prefix, d)
		}
	}
}

func TestTriageLiveUpdates(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		q := newQueueEnv(t, st, "shop")
		b := q.browser()
		b.signIn("ops@example.com", q.user("ops@example.com", services.RoleOperator))
		p := b.get("/")
		events := p.testid("triage").AttrOr("sse-connect", "")
		stamp := strings.TrimPrefix(events, "/triage/events?stamp=")

		s := openStream(t, b, events, "")
		require.Equal(t, "text/event-stream", s.res.Header.Get("Content-Type"))
		require.Equal(t, "no-cache", s.res.Header.Get("Cache-Control"))
		require.Equal(t, "no", s.res.Header.Get("X-Accel-Buffering"))
		s.next(t, "retry:", 2*time.Second)
		require.Equal(t, "id: "+stamp, s.next(t, "id:", 3*time.Second), "nothing changed: the stream only confirms the page's stamp")

		id := q.timeOut("slow", "order-9")
		start := time.Now()
		got := s.next(t, "event: triage", 2*time.Second)
		require.Equal(t, "event: triage", got)
		t.Logf("event %s after the sweep", time.Since(start))

		f := b.get("/triage/items")
		require.Equal(t, []string{id}, rowAttrs(f.testid("triage-row"), "data-action-id"))

		// A browser that reconnects with the last stamp it saw hears only of
		// what changed since; one that saw an older stamp hears at once.
		cur := strings.TrimPrefix(b.get("/").testid("triage").AttrOr("sse-connect", ""), "/triage/events?stamp=")
		require.NotEqual(t, stamp, cur)
		again := openStream(t, b, "/triage/events?stamp="+stamp, cur)
		require.Equal(t, "id: "+cur, again.next(t, "id:", 3*time.Second))
		stale := openStream(t, b, "/triage/events?stamp="+stamp, "")
		require.Equal(t, "id: "+cur, stale.next(t, "id:", 3*time.Second))
		require.Equal(t, "event: triage", stale.next(t, "event:", time.Second))
	})
}
