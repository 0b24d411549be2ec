package web

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/accounts"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
	"github.com/arbiter-ledger/arbiter/services/webhooks"
)

// fakeClock is a clock the test moves by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func scrape(t *testing.T, h http.Handler) string {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	return rec.Body.String()
}

// TestMetricsScrapesShareOneQueryPerInterval: however many scrapes come,
// at once or one after another, the gauges read from the database cost one
// query each per MetricsRefresh; once the interval has passed, the next
// scrape reads again and shows what changed.
func TestMetricsScrapesShareOneQueryPerInterval(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		ctx := context.Background()
		ledger := services.NewLedger(st, services.LedgerConfig{})
		keys := accounts.NewKeys(st)
		_, secret, err := keys.CreateKey(ctx, accounts.CreateKeyRequest{Namespace: "payments", Name: "refund-bot", Role: services.RoleAgent})
		require.NoError(t, err)
		agent, err := keys.Authenticate(ctx, secret)
		require.NoError(t, err)
		submit := func(entry string) {
			t.Helper()
			_, err := ledger.Submit(ctx, agent, [][]byte{[]byte(entry)})
			require.NoError(t, err)
		}

		var countQueries, queueQueries atomic.Int64
		m := NewMetrics(func(ctx context.Context) (map[string]int64, error) {
			countQueries.Add(1)
			return st.CountByStatus(ctx)
		}, func(ctx context.Context) (webhooks.QueueStats, error) {
			queueQueries.Add(1)
			return webhooks.QueueStats{Pending: 3}, nil
		})
		clock := &fakeClock{t: time.Now()}
		m.counts.now, m.queue.now = clock.now, clock.now
		h := m.Handler()

		submit(`{"key":"a","type":"intent","tool":"t"}`)
		var wg sync.WaitGroup
		for range 50 {
			wg.Go(func() {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
				assert.Contains(t, rec.Body.String(), `arbiter_actions{status="in_progress"} 1`)
				assert.Contains(t, rec.Body.String(), `arbiter_webhook_queue_depth 3`)
			})
		}
		wg.Wait()
		for range 50 {
			scrape(t, h)
		}
		require.EqualValues(t, 1, countQueries.Load(), "a hundred scrapes in one interval, one query")
		require.EqualValues(t, 1, queueQueries.Load())

		// The ledger changes: the numbers follow once the interval passed.
		submit(`{"key":"a","type":"succeeded","attempt":1}`)
		submit(`{"key":"b","type":"intent","tool":"t"}`)
		clock.advance(MetricsRefresh - time.Millisecond)
		require.Contains(t, scrape(t, h), `arbiter_actions{status="succeeded"} 0`, "still the reading of this interval")
		clock.advance(time.Millisecond)
		for i := range 20 {
			body := scrape(t, h)
			for _, want := range []string{`arbiter_actions{status="in_progress"} 1`, `arbiter_actions{status="succeeded"} 1`} {
				require.Contains(t, body, want, fmt.Sprintf("scrape %d", i))
			}
		}
		require.EqualValues(t, 2, countQueries.Load())
		require.EqualValues(t, 2, queueQueries.Load())
	})
}

// A failed reading is kept for the interval too: a database that is down
// is not asked again by every scrape.
func TestMetricsKeepAFailedReadingForTheInterval(t *testing.T) {
	t.Parallel()
	var n atomic.Int64
	m := NewMetrics(func(ctx context.Context) (map[string]int64, error) {
		n.Add(1)
		return nil, fmt.Errorf("database down")
	}, nil)
	clock := &fakeClock{t: time.Now()}
	m.counts.now = clock.now
	h := m.Handler()
	for range 10 {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		require.Equal(t, http.StatusServiceUnavailable, rec.Code, "a database outage is 503, as for every request")
		require.Equal(t, "5", rec.Header().Get("Retry-After"))
		require.True(t, strings.Contains(rec.Body.String(), "database down"), rec.Body.String())
	}
	require.EqualValues(t, 1, n.Load())
	clock.advance(MetricsRefresh)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	require.EqualValues(t, 2, n.Load())
}

// BenchmarkMetricsScrape measures one /metrics scrape over a seeded ledger
// (ARBITER_BENCH_ACTIONS, default 100,000 actions): "kept" answers from the
// reading of the interval, "every-scrape" counts the actions at each scrape
// (as /metrics did before). Figures: docs/benchmarks.md.
func BenchmarkMetricsScrape(b *testing.B) {
	actions := 100_000
	if v := os.Getenv("ARBITER_BENCH_ACTIONS"); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(b, err)
		actions = n
	}
	for _, d := range dbtest.Dialects {
		b.Run(string(d), func(b *testing.B) {
			st := dbtest.Open(b, d)
			_, err := st.Seed(context.Background(), services.SeedRequest{Actions: actions})
			require.NoError(b, err)
			for _, tc := range []struct {
				name  string
				every time.Duration
			}{{"kept", MetricsRefresh}, {"every-scrape", 0}} {
				b.Run(tc.name, func(b *testing.B) {
					m := NewMetrics(st.CountByStatus, nil)
					m.counts.every = tc.every
					h := m.Handler()
					req := httptest.NewRequest("GET", "/metrics", nil)
					h.ServeHTTP(httptest.NewRecorder(), req)
					for b.Loop() {
						h.ServeHTTP(httptest.NewRecorder(), req)
					}
				})
				// The database gauges alone, without the Go runtime's and
				// the process's series the handler also gathers.
				b.Run(tc.name+"/gauges", func(b *testing.B) {
					m := NewMetrics(st.CountByStatus, nil)
					m.counts.every = tc.every
					reg := prometheus.NewRegistry()
					reg.MustRegister(m)
					_, err := reg.Gather()
					require.NoError(b, err)
					for b.Loop() {
						if _, err := reg.Gather(); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		})
	}
}
