package services

import (
	"cmp"
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"time"

	"github.com/arbiter-ledger/arbiter/services/driver"
	"github.com/arbiter-ledger/arbiter/services/record"
)

// The triage queue is what needs a person now: actions waiting for a
// decision or for an agent to act on one, and recent alerts whose effect may
// have happened twice.

// TriageStatuses are the statuses that wait on a person or on an agent
// picking up a person's decision.
var TriageStatuses = []record.Status{record.StatusTimedOut, record.StatusRetryRequested, record.StatusCompensationRequested,
	record.StatusAwaitingApproval}

// TriageAlerts are the entry types shown as review alerts on the triage
// queue, until an acknowledge decision after them clears them (SPEC).
var TriageAlerts = []record.EntryType{record.TypeKeyReused, record.TypeStaleOutcome, record.TypeLateResult}

// TriageAlertWindow is how far back alerts stay on the queue when no one
// acknowledges them: then they age out.
const TriageAlertWindow = 7 * 24 * time.Hour

// markReview sets ReviewPending on each of acts that shows on triage for a
// review alert no one acknowledged.
func (l *Ledger) markReview(ctx context.Context, acts ...*record.Action) error {
	if len(acts) == 0 {
		return nil
	}
	ids := make([]string, len(acts))
	for i, a := range acts {
		ids[i] = a.ID
	}
	pending, err := l.st.ex.ReviewPending(ctx, ids, &driver.TriageParams{AlertTypes: TriageAlerts, Since: l.now().Add(-TriageAlertWindow)})
	if err != nil {
		return DBError("triage: read review alerts", err)
	}
	for _, a := range acts {
		a.ReviewPending = slices.Contains(pending, a.ID)
	}
	return nil
}

// TriageItem is one row of the queue.
type TriageItem struct {
	// Kind is the action's status, or the alert's entry type when Alert.
	Kind  string
	Alert bool
	// Since is when the action last changed (for a waiting action, when it
	// entered its status, unless late entries were recorded since) or when
	// the alert was recorded.
	Since  time.Time
	Action *record.Action
}

// Triage is the queue with the counts shown above it.
type Triage struct {
	Items []TriageItem // oldest first, at most the limit
	// Waiting is the number of items in the whole queue, beyond the limit.
	Waiting int
	Counts  map[string]int64 // open actions per status (OpenStatuses)
	Total   int64            // open actions
	Alerts  map[string]int64 // alerts per entry type within the window
	At      time.Time        // the ledger's time when the queue was read
}

// DefaultTriageLimit is the queue length shown when the caller does not say.
const DefaultTriageLimit = 100

// Triage returns the queue p may see, oldest first, and counts per status.
func (l *Ledger) Triage(ctx context.Context, p Principal, limit int) (*Triage, error) {
	if limit <= 0 {
		limit = DefaultTriageLimit
	}
	limit = min(limit, MaxListLimit)
	now := l.now()
	t := &Triage{At: now}
	if _, _, none := p.Scope(""); none {
		// A person who is a member of no namespace has an empty queue.
		t.Counts, t.Alerts, t.Items = map[string]int64{}, map[string]int64{}, []TriageItem{}
		for _, s := range OpenStatuses {
			t.Counts[string(s)] = 0
		}
		for _, typ := range TriageAlerts {
			t.Alerts[string(typ)] = 0
		}
		return t, nil
	}
	var err error
	if t.Counts, err = l.countsFor(ctx, p); err != nil {
		return nil, err
	}
	for _, n := range t.Counts {
		t.Total += n
	}
	for _, s := range TriageStatuses {
		t.Waiting += int(t.Counts[string(s)])
	}
	since := now.Add(-TriageAlertWindow)
	if t.Alerts, err = l.countAlerts(ctx, p, since); err != nil {
		return nil, err
	}
	for _, n := range t.Alerts {
		t.Waiting += int(n)
	}
	waiting, err := l.waitingActions(ctx, p, limit)
	if err != nil {
		return nil, err
	}
	alerts, err := l.recentAlerts(ctx, p, since, limit)
	if err != nil {
		return nil, err
	}
	t.Items = append(waiting, alerts...)
	// Approvals first (an agent may be waiting on one), then the oldest.
	slices.SortStableFunc(t.Items, func(a, b TriageItem) int {
		return cmp.Or(cmp.Compare(approvalRank(a), approvalRank(b)), a.Since.Compare(b.Since))
	})
	if len(t.Items) > limit {
		t.Items = t.Items[:limit]
	}
	return t, nil
}

// approvalRank puts actions awaiting approval before everything else.
func approvalRank(it TriageItem) int {
	if !it.Alert && it.Action.Status == record.StatusAwaitingApproval {
		return 0
	}
	return 1
}

// triageParams scopes the triage reads to what p may see.
// Callers first check that p sees some namespace (Scope's none).
func triageParams(p Principal, statuses []record.Status, since time.Time, limit int) *driver.TriageParams {
	q := &driver.TriageParams{Statuses: statuses, AlertTypes: TriageAlerts, Since: since, Limit: limit}
	q.Namespace, q.Namespaces, _ = p.Scope("")
	return q
}

// OpenStatuses are the statuses counted on the triage page: actions still
// running and those waiting on a person. Each is served by a partial index
// (actions_lease_idx, actions_triage_idx), so counting stays cheap with
// millions of finished actions; finished statuses are counted on demand in
// the action list and in metrics.
var OpenStatuses = []record.Status{record.StatusAwaitingApproval, record.StatusInProgress, record.StatusTimedOut,
	record.StatusRetryRequested, record.StatusCompensationRequested}

// countsFor counts open actions per status in what p may see: the waiting
// statuses and those in progress are counted apart, each by its own index.
func (l *Ledger) countsFor(ctx context.Context, p Principal) (map[string]int64, error) {
	out := map[string]int64{}
	for _, s := range OpenStatuses {
		out[string(s)] = 0
	}
	for _, statuses := range [][]record.Status{TriageStatuses, {record.StatusInProgress}} {
		counts, err := l.st.ex.TriageCounts(ctx, triageParams(p, statuses, time.Time{}, 0))
		if err != nil {
			return nil, DBError("triage: count actions", err)
		}
		for s, n := range counts {
			out[string(s)] = n
		}
	}
	return out, nil
}

func (l *Ledger) countAlerts(ctx context.Context, p Principal, since time.Time) (map[string]int64, error) {
	counts, err := l.st.ex.TriageAlertCounts(ctx, triageParams(p, nil, since, 0))
	if err != nil {
		return nil, DBError("triage: count alerts", err)
	}
	out := map[string]int64{}
	for _, typ := range TriageAlerts {
		out[string(typ)] = counts[typ]
	}
	return out, nil
}

func (l *Ledger) waitingActions(ctx context.Context, p Principal, limit int) ([]TriageItem, error) {
	actions, err := l.st.ex.TriageWaiting(ctx, triageParams(p, TriageStatuses, time.Time{}, limit))
	if err != nil {
		return nil, DBError("triage: read waiting actions", err)
	}
	out := make([]TriageItem, 0, len(actions))
	for _, a := range actions {
		out = append(out, TriageItem{Kind: string(a.Status), Since: a.UpdatedAt, Action: a})
	}
	return out, nil
}

func (l *Ledger) recentAlerts(ctx context.Context, p Principal, since time.Time, limit int) ([]TriageItem, error) {
	alerts, err := l.st.ex.TriageAlerts(ctx, triageParams(p, nil, since, limit))
	if err != nil {
		return nil, DBError("triage: read alerts", err)
	}
	out := make([]TriageItem, 0, len(alerts))
	for _, t := range alerts {
		t.Action.ReviewPending = true // the read keeps only alerts no one acknowledged
		out = append(out, TriageItem{Kind: string(t.Type), Alert: true, Since: t.RecordedAt, Action: t.Action})
	}
	return out, nil
}

// TriageStamp returns a short value that changes whenever the queue p sees
// changes: an action enters, leaves or changes in a waiting status, or an
// alert is recorded or ages out. It reads two partial indexes, so it stays
// cheap enough to poll every second.
func (l *Ledger) TriageStamp(ctx context.Context, p Principal) (string, error) {
	if _, _, none := p.Scope(""); none {
		return "none", nil
	}
	raw, err := l.st.ex.TriageStamp(ctx, triageParams(p, TriageStatuses, l.now().Add(-TriageAlertWindow), 0))
	if err != nil {
		return "", DBError("triage: read stamp", err)
	}
	h := fnv.New64a()
	h.Write([]byte(raw))
	return fmt.Sprintf("%016x", h.Sum64()), nil
}
