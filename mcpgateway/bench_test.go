package mcpgateway_test

import (
	"bufio"
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/client"
	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
)

// What the gateway costs, for docs/benchmarks.md, "The MCP gateway"
// (`ONLY=mcp bench/run-limit` runs these). The gateway is the arbiter
// binary as a host runs it (`arbiter mcp-gateway` over stdio, or with
// --listen), in front of the example payments server; Arbiter is an
// in-process server on a fresh PostgreSQL database, so that the waiting
// benchmark can read its pool.
// Each benchmark reports percentiles of b.N calls as metrics.

// BenchmarkMCPUnguardedCall times a read-only call (find_refund, which
// passes through) through the gateway and straight to the upstream over the
// same transport, alternating, and reports what the gateway adds at p50.
func BenchmarkMCPUnguardedCall(b *testing.B) {
	for _, m := range modes {
		b.Run(m.name, func(b *testing.B) {
			e := newBenchEnv(b, m, `{"name": "payments"}`)
			find := func(cs *mcp.ClientSession) time.Duration {
				return e.timeCall(b, cs, "find_refund", map[string]any{"order_id": "order-1"})
			}
			for range 20 {
				find(e.direct)
				find(e.gateway)
			}
			direct, gateway := make([]time.Duration, 0, b.N), make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if i%2 == 0 {
					direct = append(direct, find(e.direct))
					gateway = append(gateway, find(e.gateway))
				} else {
					gateway = append(gateway, find(e.gateway))
					direct = append(direct, find(e.direct))
				}
			}
			b.StopTimer()
			reportLatency(b, "direct", direct)
			reportLatency(b, "gateway", gateway)
			b.ReportMetric(ms(percentile(gateway, 0.5)-percentile(direct, 0.5)), "added-p50-ms")
		})
	}
}

// BenchmarkMCPGuardedCall times a guarded call with a new key (an intent,
// the upstream call, the outcome), its identical repeat (a replay from the
// ledger), and the same tool called straight at the upstream.
func BenchmarkMCPGuardedCall(b *testing.B) {
	for _, m := range modes {
		b.Run(m.name, func(b *testing.B) {
			e := newBenchEnv(b, m, `{"name": "payments", "tools": [{"match": "refund", "key": "refund:{order_id}"}]}`)
			refund := func(cs *mcp.ClientSession, order string) time.Duration {
				return e.timeCall(b, cs, "refund", map[string]any{"order_id": order, "amount": 100})
			}
			for i := range 20 {
				refund(e.direct, "warm-direct-"+strconv.Itoa(i))
				refund(e.gateway, "warm-"+strconv.Itoa(i))
			}
			direct, guarded, replay := make([]time.Duration, 0, b.N), make([]time.Duration, 0, b.N), make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				order := "order-" + strconv.Itoa(i)
				direct = append(direct, refund(e.direct, "direct-"+order))
				guarded = append(guarded, refund(e.gateway, order))
				replay = append(replay, refund(e.gateway, order))
			}
			b.StopTimer()
			reportLatency(b, "direct", direct)
			reportLatency(b, "guarded", guarded)
			reportLatency(b, "replay", replay)
			b.ReportMetric(ms(percentile(guarded, 0.5)-percentile(direct, 0.5)), "added-p50-ms")
		})
	}
}

// BenchmarkMCPApprovalWait starts ARBITER_MCP_WAITERS (default 200) calls
// that each wait for a person's approval (Prefer: wait), watches Arbiter's
// connection pool and PostgreSQL's backends for 3 s while they wait, then
// approves them one by one and times each call from its approval to its
// result. b.N is the number of such rounds; "before" is before the first.
func BenchmarkMCPApprovalWait(b *testing.B) {
	waiters := 200
	if v := os.Getenv("ARBITER_MCP_WAITERS"); v != "" {
		var err error
		waiters, err = strconv.Atoi(v)
		require.NoError(b, err)
	}
	m := mode{"http", true}
	url := dbtest.PostgresURL(b)
	st, err := services.Open(context.Background(), url)
	require.NoError(b, err)
	b.Cleanup(func() { st.Close() })
	_, err = st.Migrate(context.Background())
	require.NoError(b, err)
	pool, err := st.Gorm().DB()
	require.NoError(b, err)
	watch, err := sql.Open("pgx", url)
	require.NoError(b, err)
	b.Cleanup(func() { watch.Close() })
	watch.SetMaxOpenConns(1)

	e := newBenchEnvOn(b, m, st, `{"name": "payments", "approval_wait": "5m",
	  "tools": [{"match": "refund", "key": "refund:{order_id}", "require_approval": true}]}`)
	operator := e.arb.client("payments", "on-call", services.RoleOperator)
	ctx := context.Background()

	var w waitSamples
	var toResult []time.Duration
	b.ResetTimer()
	for round := 0; round < b.N; round++ {
		if round == 0 {
			w.before(b, pool, watch)
		}
		var (
			mu       sync.Mutex
			approved = map[string]time.Time{}
			wg       sync.WaitGroup
		)
		for i := range waiters {
			key := fmt.Sprintf("r%d-%d", round, i)
			wg.Add(1)
			go func() {
				defer wg.Done()
				params := &mcp.CallToolParams{Name: "refund", Arguments: map[string]any{"order_id": key, "amount": 100}}
				res, err := e.gateway.CallTool(ctx, params)
				done := time.Now()
				if err != nil || res.IsError {
					b.Errorf("refund %s: %v %s", key, err, resultText(res))
					return
				}
				mu.Lock()
				defer mu.Unlock()
				toResult = append(toResult, done.Sub(approved["refund:"+key]))
			}()
		}
		var pending []*client.Action
		deadline := time.Now().Add(2 * time.Minute)
		for len(pending) < waiters {
			require.True(b, time.Now().Before(deadline), "only %d of %d calls await approval", len(pending), waiters)
			time.Sleep(100 * time.Millisecond)
			pending = awaiting(b, e.agent)
		}
		// Every call is past its intent and in its Prefer: wait request (or
		// about to be); watch what the waiting holds.
		time.Sleep(time.Second)
		w.during(b, pool, watch, 3*time.Second)
		for _, a := range pending {
			mu.Lock()
			approved[a.Key] = time.Now()
			mu.Unlock()
			_, err := operator.Decide(ctx, a.ID, client.Decision{Decision: client.DecisionApprove, Reason: "bench"})
			require.NoError(b, err)
		}
		wg.Wait()
	}
	b.StopTimer()
	require.Equal(b, waiters*b.N, e.pay.state().Calls["refund"], "every approved call ran once")
	b.ReportMetric(float64(waiters), "waiting-calls")
	w.report(b)
	reportLatency(b, "approve-to-result", toResult)
}

// awaiting lists the actions waiting for approval.
func awaiting(b *testing.B, agent *client.Client) []*client.Action {
	var out []*client.Action
	opts := client.ListOptions{Status: []client.Status{client.StatusAwaitingApproval}, Limit: 500}
	for {
		page, err := agent.ListActions(context.Background(), opts)
		require.NoError(b, err)
		for i := range page.Actions {
			out = append(out, &page.Actions[i])
		}
		if page.NextCursor == "" {
			return out
		}
		opts.Cursor = page.NextCursor
	}
}

// waitSamples is what Arbiter's pool (database/sql's counters) and
// PostgreSQL (pg_stat_activity, this database's backends other than the
// watcher's own) show before the calls and while they wait.
type waitSamples struct {
	poolOpenBefore, backendsBefore                    float64
	inUse                                             []int // connections in use, one per sample
	inUseMax, inUseSum, openMax, backendsMax, busyMax float64
	poolWaits                                         int64
}

func (w *waitSamples) before(b *testing.B, pool, watch *sql.DB) {
	w.poolOpenBefore = float64(pool.Stats().OpenConnections)
	w.backendsBefore, _ = backends(b, watch)
}

func (w *waitSamples) during(b *testing.B, pool, watch *sql.DB, d time.Duration) {
	waits0 := pool.Stats().WaitCount
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		s := pool.Stats()
		all, busy := backends(b, watch)
		w.inUse = append(w.inUse, s.InUse)
		w.inUseSum += float64(s.InUse)
		w.inUseMax = max(w.inUseMax, float64(s.InUse))
		w.openMax = max(w.openMax, float64(s.OpenConnections))
		w.backendsMax = max(w.backendsMax, all)
		w.busyMax = max(w.busyMax, busy)
	}
	w.poolWaits += pool.Stats().WaitCount - waits0
}

func (w *waitSamples) report(b *testing.B) {
	b.ReportMetric(w.poolOpenBefore, "pool-open-before")
	b.ReportMetric(w.backendsBefore, "pg-backends-before")
	b.ReportMetric(w.inUseMax, "pool-in-use-max")
	b.ReportMetric(w.inUseSum/float64(max(len(w.inUse), 1)), "pool-in-use-mean")
	b.ReportMetric(float64(percentile(w.inUse, 0.5)), "pool-in-use-p50")
	b.ReportMetric(float64(percentile(w.inUse, 0.99)), "pool-in-use-p99")
	idle := 0
	for _, n := range w.inUse {
		if n == 0 {
			idle++
		}
	}
	b.ReportMetric(100*float64(idle)/float64(max(len(w.inUse), 1)), "pool-none-in-use-%")
	b.ReportMetric(w.openMax, "pool-open-max")
	b.ReportMetric(float64(w.poolWaits), "pool-waits")
	b.ReportMetric(w.backendsMax, "pg-backends-max")
	b.ReportMetric(w.busyMax, "pg-busy-max")
	b.ReportMetric(float64(len(w.inUse)), "samples")
}

// backends counts this database's backends, and those not idle.
func backends(b *testing.B, watch *sql.DB) (all, busy float64) {
	err := watch.QueryRow(`SELECT count(*), count(*) FILTER (WHERE state <> 'idle') FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&all, &busy)
	require.NoError(b, err)
	return all, busy
}

// benchEnv is a gateway process and a host session with it, and a host
// session straight with the same upstream over the same transport.
type benchEnv struct {
	arb     *arbiter
	agent   *client.Client
	pay     *payments
	gateway *mcp.ClientSession
	direct  *mcp.ClientSession
}

func newBenchEnv(b *testing.B, m mode, config string) *benchEnv {
	return newBenchEnvOn(b, m, dbtest.Open(b, services.Postgres), config)
}

func newBenchEnvOn(b *testing.B, m mode, st *services.Store, config string) *benchEnv {
	b.Helper()
	arb := startArbiter(b, st)
	up, pay := startUpstream(b, m)
	secret := arb.key("payments", "gateway", services.RoleAgent)
	cfg := filepath.Join(b.TempDir(), "gateway.json")
	require.NoError(b, os.WriteFile(cfg, []byte(config), 0o600))
	e := &benchEnv{arb: arb, agent: arb.clientFor(secret), pay: pay}

	host := mcp.NewClient(&mcp.Implementation{Name: "bench-host", Version: "1"}, nil)
	connect := func(t mcp.Transport) *mcp.ClientSession {
		cs, err := host.Connect(context.Background(), t, nil)
		require.NoError(b, err)
		b.Cleanup(func() { _ = cs.Close() })
		return cs
	}
	env := append(os.Environ(), "ARBITER_URL="+arb.url, "ARBITER_API_KEY="+secret)
	if !m.http {
		cmd := exec.Command(arbiterCommand(b), append([]string{"mcp-gateway", "--config", cfg, "--"}, up.Command...)...)
		cmd.Env = append(env, "ARBITER_LOG_LEVEL=warn")
		cmd.Stderr = os.Stderr
		e.gateway = connect(&mcp.CommandTransport{Command: cmd})
		// Another server process with its own state, over stdio as well.
		direct := exec.Command(paymentsBin, "-state", filepath.Join(b.TempDir(), "direct.json"))
		e.direct = connect(&mcp.CommandTransport{Command: direct})
		return e
	}
	cmd := exec.Command(arbiterCommand(b), "mcp-gateway", "--config", cfg, "--listen", "127.0.0.1:0", "--upstream-url", up.URL)
	cmd.Env = env
	stderr, err := cmd.StderrPipe()
	require.NoError(b, err)
	require.NoError(b, cmd.Start())
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := bufio.NewScanner(stderr)
	// The line "serving streamable HTTP url=…", not the line before it
	// that names the upstream.
	served := regexp.MustCompile(`serving streamable HTTP.* url=(http://\S+/mcp)`)
	var endpoint string
	for endpoint == "" && lines.Scan() {
		if m := served.FindStringSubmatch(lines.Text()); m != nil {
			endpoint = m[1]
		}
	}
	require.NotEmpty(b, endpoint, "the gateway did not say where it serves")
	go func() { _, _ = io.Copy(io.Discard, stderr) }()
	e.gateway = connect(&mcp.StreamableClientTransport{Endpoint: endpoint})
	e.direct = connect(&mcp.StreamableClientTransport{Endpoint: up.URL})
	return e
}

func (e *benchEnv) timeCall(b *testing.B, cs *mcp.ClientSession, tool string, args map[string]any) time.Duration {
	t0 := time.Now()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	d := time.Since(t0)
	if err != nil || res.IsError {
		b.Fatalf("%s: %v %s", tool, err, resultText(res))
	}
	return d
}

func resultText(res *mcp.CallToolResult) string {
	if res == nil {
		return ""
	}
	return text(res)
}

func reportLatency(b *testing.B, name string, d []time.Duration) {
	b.ReportMetric(ms(percentile(d, 0.5)), name+"-p50-ms")
	b.ReportMetric(ms(percentile(d, 0.99)), name+"-p99-ms")
}

// percentile is the nearest-rank percentile q of d.
func percentile[T cmp.Ordered](d []T, q float64) T {
	if len(d) == 0 {
		var zero T
		return zero
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[int(q*float64(len(s)-1)+0.5)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
