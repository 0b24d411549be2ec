package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/accounts"
	"github.com/arbiter-ledger/arbiter/services/record"
	"github.com/arbiter-ledger/arbiter/services/webhooks"
)

type bulkReport struct {
	Database  string `json:"database"`
	TimedOut  int    `json:"timed_out"`
	BatchSize int    `json:"batch_size"`
	// Bulk: every timed-out action abandoned by POST /v1/decisions' service
	// call, one batch of ids after another.
	Batches         int     `json:"batches"`
	Applied         int     `json:"applied"`
	Seconds         float64 `json:"seconds"`
	PerSecond       float64 `json:"per_second"`
	BatchMS         latency `json:"batch_ms"`
	DecisionEntries int     `json:"decision_entries"`
	DecidedAlerts   int     `json:"decided_alerts"`
	// Single: the same decision one action at a time, for comparison.
	Singles         int     `json:"singles"`
	SingleSeconds   float64 `json:"single_seconds"`
	SinglePerSecond float64 `json:"single_per_second"`
}

// timeBulk records n intents (and singles more) with 1-second leases,
// lets the sweeper time them out, subscribes an endpoint to
// action.decided so that every decision writes its alert and delivery,
// and times abandoning the n in bulk decisions of batch ids each, one
// after another; then the singles one decision at a time. It checks that
// each of the n got exactly one decision entry and one alert.
func timeBulk(ctx context.Context, st *services.Store, ns string, n, batch, singles int) (*bulkReport, error) {
	keys := accounts.NewKeys(st)
	principal := func(name string, role services.Role) (services.Principal, error) {
		_, secret, err := keys.CreateKey(ctx, accounts.CreateKeyRequest{Namespace: ns, Name: name, Role: role})
		if err != nil {
			return services.Principal{}, err
		}
		return keys.Authenticate(ctx, secret)
	}
	agent, err := principal("bench-bulk-agent", services.RoleAgent)
	if err != nil {
		return nil, err
	}
	operator, err := principal("bench-bulk-operator", services.RoleOperator)
	if err != nil {
		return nil, err
	}
	ledger := services.NewLedger(st, services.LedgerConfig{})
	if err := recordIntents(ctx, ledger, agent, "bulk", "bench.bulk", n); err != nil {
		return nil, err
	}
	if singles > 0 {
		if err := recordIntents(ctx, ledger, agent, "single", "bench.single", singles); err != nil {
			return nil, err
		}
	}
	select { // the last lease ends a second after the last intent
	case <-time.After(1100 * time.Millisecond):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if _, err := ledger.Sweep(ctx); err != nil {
		return nil, err
	}
	bulkIDs, err := timedOutIDs(ctx, ledger, operator, "bench.bulk")
	if err != nil {
		return nil, err
	}
	singleIDs, err := timedOutIDs(ctx, ledger, operator, "bench.single")
	if err != nil {
		return nil, err
	}
	if len(bulkIDs) != n || len(singleIDs) != singles {
		return nil, fmt.Errorf("bench: %d and %d actions timed out, expected %d and %d", len(bulkIDs), len(singleIDs), n, singles)
	}

	admin := services.Principal{Kind: "api_key", ID: "bench", Name: "bench", Role: services.RoleAdmin}
	hooks := webhooks.New(st, webhooks.Config{Policy: webhooks.AddressPolicy{AllowPrivate: true}})
	url, events, nss := "http://127.0.0.1:9/arbiter-bench", []record.EventType{record.EventDecided}, []string{ns}
	ep, err := hooks.CreateEndpoint(ctx, admin, webhooks.EndpointInput{URL: &url, EventTypes: &events, Namespaces: &nss})
	if err != nil {
		return nil, err
	}
	defer hooks.DeleteEndpoint(context.WithoutCancel(ctx), admin, ep.ID)

	rep := &bulkReport{Database: st.Where, TimedOut: n, BatchSize: batch, Singles: singles}
	var took []time.Duration
	start := time.Now()
	for from := 0; from < n; from += batch {
		ids := bulkIDs[from:min(from+batch, n)]
		count := len(ids)
		t0 := time.Now()
		ans, err := ledger.DecideMany(ctx, operator, services.BulkInput{Filter: &services.BulkFilter{IDs: ids},
			Decision: record.DecisionAbandon, Reason: "bench: the provider confirms none went out", MaxCount: &count})
		if err != nil {
			return nil, err
		}
		took = append(took, time.Since(t0))
		rep.Applied += ans.Result.Applied
		rep.Batches++
	}
	rep.Seconds = time.Since(start).Seconds()
	rep.PerSecond = float64(rep.Applied) / rep.Seconds
	rep.BatchMS = summarize(took)
	if rep.DecisionEntries, err = countRows(ctx, st, `SELECT count(DISTINCT action_id) FROM entries WHERE namespace = ? AND type = 'decision'`, ns); err != nil {
		return nil, err
	}
	if rep.DecidedAlerts, err = countRows(ctx, st, `SELECT count(DISTINCT action_id) FROM webhook_messages WHERE namespace = ? AND event_type = 'action.decided'`, ns); err != nil {
		return nil, err
	}
	all, err := countRows(ctx, st, `SELECT count(*) FROM webhook_messages WHERE namespace = ? AND event_type = 'action.decided'`, ns)
	if err != nil {
		return nil, err
	}
	entries, err := countRows(ctx, st, `SELECT count(*) FROM entries WHERE namespace = ? AND type = 'decision'`, ns)
	if err != nil {
		return nil, err
	}
	if rep.Applied != n || rep.DecisionEntries != n || entries != n || rep.DecidedAlerts != n || all != n {
		return rep, fmt.Errorf("bench: %d actions decided in bulk with %d decision entries (%d actions) and %d alerts (%d actions); expected %d of each",
			rep.Applied, entries, rep.DecisionEntries, all, rep.DecidedAlerts, n)
	}

	start = time.Now()
	for _, id := range singleIDs {
		if _, _, err := ledger.Decide(ctx, operator, id, services.DecisionInput{Decision: record.DecisionAbandon,
			Reason: "bench: the provider confirms it did not go out"}); err != nil {
			return nil, err
		}
	}
	if singles > 0 {
		rep.SingleSeconds = time.Since(start).Seconds()
		rep.SinglePerSecond = float64(singles) / rep.SingleSeconds
	}
	return rep, nil
}

// timedOutIDs lists the timed-out actions of a tool, page by page.
func timedOutIDs(ctx context.Context, ledger *services.Ledger, p services.Principal, tool string) ([]string, error) {
	var ids []string
	f := services.ActionFilter{Statuses: []record.Status{record.StatusTimedOut}, Tool: tool, Limit: services.MaxListLimit}
	for {
		page, err := ledger.List(ctx, p, f)
		if err != nil {
			return nil, err
		}
		for _, a := range page.Actions {
			ids = append(ids, a.ID)
		}
		if page.NextCursor == nil {
			return ids, nil
		}
		f.Cursor = *page.NextCursor
	}
}

func countRows(ctx context.Context, st *services.Store, q string, args ...any) (int, error) {
	var n int
	err := st.Gorm().WithContext(ctx).Raw(q, args...).Scan(&n).Error
	return n, err
}
