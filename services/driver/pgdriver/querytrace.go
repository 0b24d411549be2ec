package pgdriver

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
)

// queryTracer records the reads a PostgreSQL store runs while capturing is
// on (and statements with a WITH clause, such as retention's batch), so a test can EXPLAIN exactly the SQL the services send. Off, it costs
// one atomic load per query.
type queryTracer struct {
	on      atomic.Bool
	mu      sync.Mutex
	queries []tracedQuery
}

type tracedQuery struct {
	sql  string
	args []any
}

func (t *queryTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if sql := strings.TrimSpace(strings.ToUpper(d.SQL)); t.on.Load() && (strings.HasPrefix(sql, "SELECT") || strings.HasPrefix(sql, "WITH")) {
		t.mu.Lock()
		t.queries = append(t.queries, tracedQuery{sql: d.SQL, args: d.Args})
		t.mu.Unlock()
	}
	return ctx
}

func (t *queryTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// CapturePlans runs fn and returns the query plan of every read it made, by
// SQL text; for tests of index use.
func (d *Driver) CapturePlans(fn func()) map[string]string {
	d.tracer.mu.Lock()
	d.tracer.queries = nil
	d.tracer.mu.Unlock()
	d.tracer.on.Store(true)
	fn()
	d.tracer.on.Store(false)
	d.tracer.mu.Lock()
	queries := d.tracer.queries
	d.tracer.queries = nil
	d.tracer.mu.Unlock()
	plans := map[string]string{}
	for _, q := range queries {
		if strings.HasPrefix(q.sql, "SELECT 1") || strings.Contains(q.sql, "goose_db_version") {
			continue
		}
		rows, err := d.db.Query("EXPLAIN "+q.sql, q.args...)
		if err != nil {
			plans[q.sql] = "EXPLAIN failed: " + err.Error()
			continue
		}
		var lines []string
		for rows.Next() {
			var line string
			if rows.Scan(&line) == nil {
				lines = append(lines, line)
			}
		}
		rows.Close()
		plans[q.sql] = strings.Join(lines, "\n")
	}
	return plans
}
