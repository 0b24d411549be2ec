package services_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/arbiter-ledger/arbiter/services/webhooks"
	"github.com/arbiter-ledger/arbiter/services/webhooks/webhookstest"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
	"github.com/arbiter-ledger/arbiter/services/record"
)

// TestSweepTimesOutExpiredLeases: expired leases become timed_out with one
// system entry each; live ones, extended ones and finished actions are left
// alone.
func TestSweepTimesOutExpiredLeases(t *testing.T) {
	t.Parallel()
	type want struct {
		status  record.Status
		version int
		swept   bool // a timed_out entry was appended
	}
	cases := []struct {
		key     string
		timeout int
		then    string // an entry sent 50 s after the intents, if any
		want    want
	}{
		{key: "expired-a", timeout: 60, want: want{"timed_out", 2, true}},
		{key: "expired-b", timeout: 1, want: want{"timed_out", 2, true}},
		{key: "expires-exactly-now", timeout: 61, want: want{"timed_out", 2, true}},
		{key: "live", timeout: 62, want: want{"in_progress", 1, false}},
		{key: "long", timeout: 600, want: want{"in_progress", 1, false}},
		{key: "heartbeat-extended", timeout: 60, then: `{"key":"heartbeat-extended","type":"heartbeat","attempt":1,"timeout":120}`,
			want: want{"in_progress", 2, false}},
		{key: "finished", timeout: 60, then: `{"key":"finished","type":"succeeded","attempt":1}`,
			want: want{"succeeded", 2, false}},
		{key: "failed", timeout: 60, then: `{"key":"failed","type":"failed","attempt":1,"error":"e","retriable":true}`,
			want: want{"failed", 2, false}},
	}
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		ctx := context.Background()
		f := newFixture(t, st, FixtureOpts{})
		for _, tc := range cases {
			require.Equal(t, record.OutcomeProceed, submit(t, f.l, f.agent, intent(IntentOpts{Key: tc.key, Timeout: tc.timeout})).Outcome)
		}
		f.clock.Advance(50 * time.Second)
		for _, tc := range cases {
			if tc.then != "" {
				require.Equal(t, record.OutcomeRecorded, submit(t, f.l, f.agent, tc.then).Outcome)
			}
		}
		before := map[string]*record.Action{}
		for _, tc := range cases {
			before[tc.key] = f.action(t, tc.key)
		}
		now := f.clock.Advance(11 * time.Second)

		n, err := f.l.Sweep(ctx)
		require.NoError(t, err)
		wantSwept := 0
		for _, tc := range cases {
			if tc.want.swept {
				wantSwept++
			}
		}
		require.Equal(t, wantSwept, n)

		for _, tc := range cases {
			t.Run(tc.key, func(t *testing.T) {
				a := f.action(t, tc.key)
				require.Equal(t, tc.want.status, a.Status)
				require.Equal(t, tc.want.version, a.Version)
				require.Equal(t, 1, a.Attempt)
				require.Equal(t, before[tc.key].LeaseUntil, a.LeaseUntil, "the lease is kept as evidence")
				es := f.entries(t, a.ID)
				last := es[len(es)-1]
				if !tc.want.swept {
					require.NotEqual(t, record.TypeTimedOut, last.Type)
					require.Equal(t, 0, countEntries(t, st, a.ID, "timed_out"))
					return
				}
				require.Equal(t, 1, countEntries(t, st, a.ID, "timed_out"))
				requireEntries(t, []wantEntry{{"timed_out", "system", 1}}, es[len(es)-1:], now)
				require.Equal(t, record.Actor{Kind: "system", Name: "sweeper"}, last.Actor)
				var p struct {
					LeaseUntil time.Time `json:"lease_until"`
				}
				require.NoError(t, json.Unmarshal(last.Payload, &p))
				require.True(t, p.LeaseUntil.Equal(*a.LeaseUntil), "the entry names the lease that passed")
			})
		}

		// A second sweep finds nothing.
		n, err = f.l.Sweep(ctx)
		require.NoError(t, err)
		require.Zero(t, n)
		require.Equal(t, wantSwept, countEntries(t, st, "", "timed_out"))
	})
}

// TestSweepSubSecondLeases: leases that differ by a fraction of a second are
// ordered right (SQLite compares times as text).
func TestSweepSubSecondLeases(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		ctx := context.Background()
		f := newFixture(t, st, FixtureOpts{})
		f.clock.Advance(250 * time.Millisecond)
		for key, timeout := range map[string]string{"a": "1", "b": "1.5", "c": "1.875", "d": "10"} {
			res := submit(t, f.l, f.agent, fmt.Sprintf(`{"key":%q,"type":"intent","tool":"t","timeout":%s}`, key, timeout))
			require.Equal(t, record.OutcomeProceed, res.Outcome)
		}
		steps := []struct {
			advance time.Duration
			swept   int
			timed   string // keys timed out so far
		}{
			{900 * time.Millisecond, 0, ""},
			{100 * time.Millisecond, 1, "a"}, // exactly at a's lease
			{499 * time.Millisecond, 0, "a"},
			{2 * time.Millisecond, 1, "ab"},
			{374 * time.Millisecond, 1, "abc"}, // exactly at c's lease
			{8 * time.Second, 0, "abc"},
		}
		for i, s := range steps {
			f.clock.Advance(s.advance)
			n, err := f.l.Sweep(ctx)
			require.NoError(t, err)
			require.Equal(t, s.swept, n, "step %d", i)
			for _, key := range []string{"a", "b", "c", "d"} {
				want := record.StatusInProgress
				if strings.Contains(s.timed, key) {
					want = record.StatusTimedOut
				}
				require.Equal(t, want, f.action(t, key).Status, "step %d key %s", i, key)
			}
		}
	})
}

// seedLeases creates n actions in namespace f whose 60 s lease runs from the
// fixture's current time.
func seedLeases(t *testing.T, f *fixture, prefix string, n, timeout int) {
	t.Helper()
	for start := 0; start < n; start += services.MaxBatchEntries {
		var raws []string
		for i := start; i < min(n, start+services.MaxBatchEntries); i++ {
			raws = append(raws, intent(IntentOpts{Key: fmt.Sprintf("%s-%d", prefix, i), Timeout: timeout}))
		}
		for _, r := range submitAll(t, f.l, f.agent, raws...) {
			require.Equal(t, record.OutcomeProceed, r.Outcome, "%+v", r.Error)
		}
	}
}

func countStatus(t *testing.T, f *fixture, st record.Status) int {
	t.Helper()
	n := 0
	f2 := services.ActionFilter{Statuses: []record.Status{st}, Limit: services.MaxListLimit}
	for {
		page, err := f.l.List(context.Background(), f.agent, f2)
		require.NoError(t, err)
		n += len(page.Actions)
		if page.NextCursor == nil {
			return n
		}
		f2.Cursor = *page.NextCursor
	}
}

// TestSweepMoreThanOneBatch: every expired lease is swept, however many.
func TestSweepMoreThanOneBatch(t *testing.T) {
	t.Parallel()
	expired := services.SweepBatch + 25
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		f := newFixture(t, st, FixtureOpts{})
		seedLeases(t, f, "exp", expired, 60)
		seedLeases(t, f, "live", 5, 3600)
		f.clock.Advance(time.Minute)

		n, err := f.l.Sweep(context.Background())
		require.NoError(t, err)
		require.Equal(t, expired, n)
		require.Equal(t, expired, countEntries(t, st, "", "timed_out"))
		require.Equal(t, expired, countStatus(t, f, record.StatusTimedOut))
		require.Equal(t, 5, countStatus(t, f, record.StatusInProgress))
	})
}

// TestSweepExactlyOnceAcrossProcesses: ledgers sharing a database sweep
// concurrently, and each expired lease is timed out exactly once.
func TestSweepExactlyOnceAcrossProcesses(t *testing.T) {
	t.Parallel()
	expired := services.SweepBatch + 100
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		c := newClock()
		f := newFixture(t, st, FixtureOpts{Clock: c})
		seedLeases(t, f, "exp", expired, 60)
		seedLeases(t, f, "live", 10, 3600)
		c.Advance(time.Minute)

		const sweepers = 4
		counts := make([]int, sweepers)
		errs := make([]error, sweepers)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range sweepers {
			l, _ := newLedger(st, LedgerOpts{Clock: c}) // one Ledger per "process"
			wg.Go(func() {
				<-start
				counts[i], errs[i] = l.Sweep(context.Background())
			})
		}
		close(start)
		wg.Wait()

		total := 0
		for i := range sweepers {
			require.NoError(t, errs[i])
			total += counts[i]
		}
		require.Equal(t, expired, total, "sweep counts %v", counts)
		require.Equal(t, expired, countEntries(t, st, "", "timed_out"))
		require.Equal(t, expired, countStatus(t, f, record.StatusTimedOut))
		require.Equal(t, 10, countStatus(t, f, record.StatusInProgress))
		page, err := f.l.List(context.Background(), f.agent, services.ActionFilter{Statuses: []record.Status{"timed_out"}, Limit: 20})
		require.NoError(t, err)
		for _, a := range page.Actions {
			require.Equal(t, 2, a.Version, "timed out once")
			require.Equal(t, 1, countEntries(t, st, a.ID, "timed_out"))
		}
	})
}

// TestPrune: retention deletes old terminal actions with their entries and
// never an unresolved action or a recent one.
func TestPrune(t *testing.T) {
	t.Parallel()
	const retention = 30 * 24 * time.Hour
	type seeded struct {
		name   string
		path   []op
		recent bool // created after the clock moved past retention
		pruned bool
	}
	cases := []seeded{
		{name: "old succeeded", path: toSucceeded, pruned: true},
		{name: "old failed", path: toFailed, pruned: true},
		{name: "old confirmed", path: toConfirmed, pruned: true},
		{name: "old compensated", path: toCompensated, pruned: true},
		{name: "old abandoned", path: toAbandoned, pruned: true},
		{name: "old timed_out", path: toTimedOut},
		{name: "old retry_requested", path: toRetryRequested},
		{name: "old compensation_requested", path: toCompRequested},
		// Last of the old ones, and no sweep after it: it stays in_progress.
		{name: "old in_progress", path: toInProgress},
		{name: "recent succeeded", path: toSucceeded, recent: true},
		{name: "recent compensated", path: toCompensated, recent: true},
		{name: "recent failed", path: toFailed, recent: true},
	}
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		ctx := context.Background()
		c := newClock()
		l, _ := newLedger(st, LedgerOpts{Clock: c})
		fixtures := make([]*fixture, len(cases))
		build := func(recent bool) {
			for i, tc := range cases {
				if tc.recent != recent {
					continue
				}
				f := newFixture(t, st, FixtureOpts{Clock: c, Ledger: l})
				for _, o := range tc.path {
					o(t, f)
				}
				fixtures[i] = f
			}
		}
		build(false)
		c.Advance(retention + time.Hour)
		build(true)
		cutoff := c.Now().Add(-retention)

		entriesBefore := make([]int, len(cases))
		ids := make([]string, len(cases))
		for i, f := range fixtures {
			a := f.action(t, "k")
			require.Equal(t, strings.Fields(cases[i].name)[1], string(a.Status), "seeded %s", cases[i].name)
			ids[i] = a.ID
			entriesBefore[i] = countEntries(t, st, ids[i], "")
			require.Positive(t, entriesBefore[i])
		}
		wantPruned := 0
		for _, tc := range cases {
			if tc.pruned {
				wantPruned++
			}
		}

		n, err := l.Prune(ctx, cutoff)
		require.NoError(t, err)
		require.EqualValues(t, wantPruned, n)

		for i, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				f := fixtures[i]
				_, err := l.Action(ctx, f.agent, ids[i])
				if tc.pruned {
					require.ErrorIs(t, err, services.ErrNotFound)
					require.Zero(t, countEntries(t, st, ids[i], ""), "entries go with the action")
					return
				}
				require.NoError(t, err)
				require.Equal(t, entriesBefore[i], countEntries(t, st, ids[i], ""))
			})
		}

		// Pruning again finds nothing; the key of a pruned action is free.
		n, err = l.Prune(ctx, cutoff)
		require.NoError(t, err)
		require.Zero(t, n)
		require.Equal(t, record.OutcomeProceed, submit(t, l, fixtures[0].agent, intentK).Outcome)
	})
}

// TestPruneCountsFromNewestEntry: a recent entry (a note, a resent report)
// on an old finished action keeps it, and its timeline, past retention.
func TestPruneCountsFromNewestEntry(t *testing.T) {
	t.Parallel()
	const retention = 30 * 24 * time.Hour
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		f := newFixture(t, st, FixtureOpts{})
		for _, o := range toSucceeded {
			o(t, f)
		}
		f.clock.Advance(retention + time.Hour)
		res := submit(t, f.l, f.agent, `{"key":"k","type":"note","message":"customer asked about this refund"}`)
		require.Equal(t, record.OutcomeRecorded, res.Outcome)
		n, err := f.l.Prune(context.Background(), f.clock.Now().Add(-retention))
		require.NoError(t, err)
		require.Zero(t, n)
		a := f.action(t, "k")
		require.Equal(t, record.StatusSucceeded, a.Status)
		require.Equal(t, f.clock.Now(), a.UpdatedAt)
	})
}

// TestPruneWebhookMessages: retention takes delivered and failed webhook
// messages past the horizon, with their deliveries, and keeps any message
// that still has a pending delivery.
func TestPruneWebhookMessages(t *testing.T) {
	t.Parallel()
	const retention = 30 * 24 * time.Hour
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		ctx := context.Background()
		url := "http://127.0.0.1:9/hook"
		_, err := webhooks.New(st, webhooks.Config{Policy: webhooks.AddressPolicy{AllowPrivate: true}}).CreateEndpoint(ctx, webhookstest.Admin(),
			webhooks.EndpointInput{URL: &url, EventTypes: &[]record.EventType{record.EventTimedOut}})
		require.NoError(t, err)
		f := newFixture(t, st, FixtureOpts{})
		for _, k := range []string{"delivered", "pending"} {
			submit(t, f.l, f.agent, intent(IntentOpts{Key: k, Timeout: 1}))
		}
		f.clock.Advance(2 * time.Second)
		_, err = f.l.Sweep(ctx)
		require.NoError(t, err)
		delivered := f.action(t, "delivered")
		require.NoError(t, st.ExecForTest(ctx, `UPDATE webhook_deliveries SET state = 'succeeded' WHERE message_id IN
			(SELECT id FROM webhook_messages WHERE CAST(action_id AS text) = '`+delivered.ID+`')`))
		require.Equal(t, 2, mustCount(t, st, "webhook_deliveries"))

		f.clock.Advance(retention + time.Hour)
		_, err = f.l.Prune(ctx, f.clock.Now().Add(-retention))
		require.NoError(t, err)
		n, err := st.CountMessages(ctx, "", "")
		require.NoError(t, err)
		require.Equal(t, 1, n, "the message with a pending delivery stays")
		n, err = st.CountMessages(ctx, delivered.ID, "")
		require.NoError(t, err)
		require.Zero(t, n)
		require.Equal(t, 1, mustCount(t, st, "webhook_deliveries"), "its deliveries went with it")
	})
}

func mustCount(t *testing.T, st *services.Store, table string) int {
	t.Helper()
	n, err := st.CountRows(context.Background(), table)
	require.NoError(t, err)
	return n
}

// TestSweepBatchSkipsActionsChangedSinceRead: a batch whose actions changed
// between the sweeper's read and its write times out only the others. An
// action whose version moved (a heartbeat, an outcome) is left as the other
// writer left it, with no timed_out entry and no alert; one that only had an
// entry appended (a note) is timed out after it. Entries, messages and
// deliveries exist exactly for the actions timed out, each message naming
// its entry's seq.
func TestSweepBatchSkipsActionsChangedSinceRead(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		ctx := context.Background()
		e := newHookEnv(t, st)
		ep := e.endpoint(t, webhookstest.EndpointOpts{URL: "http://127.0.0.1:9/hook"})
		const n = 12
		keys := make([]string, n)
		for i := range keys {
			keys[i] = fmt.Sprintf("k%d", i)
			require.Equal(t, record.OutcomeProceed, submit(t, e.l, e.agent, intent(IntentOpts{Key: keys[i], Timeout: 60})).Outcome)
		}
		e.clock.Advance(time.Second)
		read := make([]*record.Action, n)
		for i, k := range keys {
			read[i] = e.action(t, k)
		}
		e.clock.Advance(29 * time.Second)
		changed := map[string]record.Status{"k1": record.StatusInProgress, "k4": record.StatusSucceeded, "k7": record.StatusFailed}
		for _, raw := range []string{
			`{"key":"k1","type":"heartbeat","attempt":1,"timeout":120}`,
			`{"key":"k4","type":"succeeded","attempt":1}`,
			`{"key":"k7","type":"failed","attempt":1,"error":"e","retriable":false}`,
			`{"key":"k9","type":"note","message":"still waiting for the PSP"}`,
		} {
			require.Equal(t, record.OutcomeRecorded, submit(t, e.l, e.agent, raw).Outcome, raw)
		}
		e.clock.Advance(31 * time.Second)

		got, err := e.l.TimeOutAsOf(ctx, read)
		require.NoError(t, err)
		require.Equal(t, n-len(changed), got)

		for i, k := range keys {
			a := e.action(t, k)
			timedOut, err := st.CountMessages(ctx, a.ID, record.EventTimedOut)
			require.NoError(t, err)
			if want, ok := changed[k]; ok {
				require.Equal(t, want, a.Status, k)
				require.Equal(t, 2, a.Version, "%s is as the other writer left it", k)
				require.Zero(t, countEntries(t, st, a.ID, "timed_out"), k)
				require.Equal(t, 2, countEntries(t, st, a.ID, ""), k)
				require.Zero(t, timedOut, k)
				continue
			}
			require.Equal(t, record.StatusTimedOut, a.Status, k)
			require.Equal(t, read[i].Version+1, a.Version, k)
			es := e.entries(t, a.ID)
			last := es[len(es)-1]
			require.Equal(t, record.TypeTimedOut, last.Type, k)
			require.Equal(t, 1, countEntries(t, st, a.ID, "timed_out"), k)
			wantSeq := 2
			if k == "k9" {
				wantSeq = 3 // after the note
			}
			require.Equal(t, wantSeq, last.Seq, k)
			require.Len(t, es, wantSeq, k)
			require.Equal(t, 1, timedOut, k)
			seqs, err := st.MessageEntrySeqs(ctx, a.ID)
			require.NoError(t, err)
			require.Equal(t, []int{wantSeq}, seqs, "%s: the alert names the entry", k)
		}
		require.Equal(t, n-len(changed), countEntries(t, st, "", "timed_out"))
		msgs, err := st.CountMessages(ctx, "", record.EventTimedOut)
		require.NoError(t, err)
		require.Equal(t, n-len(changed), msgs)
		require.Len(t, e.deliveries(t, ep.ID), n-len(changed), "one delivery per alert")
		require.Equal(t, n-len(changed), mustCount(t, st, "webhook_deliveries"))

		// Writing the same read again times out nothing more.
		got, err = e.l.TimeOutAsOf(ctx, read)
		require.NoError(t, err)
		require.Zero(t, got)
		require.Equal(t, n-len(changed), countEntries(t, st, "", "timed_out"))
		// The heartbeat's lease is still live: a sweep leaves it.
		swept, err := e.l.Sweep(ctx)
		require.NoError(t, err)
		require.Zero(t, swept)
	})
}

// TestSweepTwoLedgersManyLeases: two ledgers on one database sweep 2,000
// expired leases at once, several batches each; every lease is timed out
// exactly once, with exactly one entry and one alert.
func TestSweepTwoLedgersManyLeases(t *testing.T) {
	t.Parallel()
	const expired = 2000
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		ctx := context.Background()
		c := newClock()
		e := newHookEnv(t, st)
		e.endpoint(t, webhookstest.EndpointOpts{URL: "http://127.0.0.1:9/hook"})
		f := newFixture(t, st, FixtureOpts{Clock: c})
		seedLeases(t, f, "exp", expired, 60)
		seedLeases(t, f, "live", 10, 3600)
		c.Advance(time.Minute)

		var counts [2]int
		var errs [2]error
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range counts {
			l, _ := newLedger(st, LedgerOpts{Clock: c})
			wg.Go(func() {
				<-start
				counts[i], errs[i] = l.Sweep(ctx)
			})
		}
		close(start)
		wg.Wait()
		require.NoError(t, errs[0])
		require.NoError(t, errs[1])
		require.Equal(t, expired, counts[0]+counts[1], "sweep counts %v", counts)

		require.Equal(t, expired, countStatus(t, f, record.StatusTimedOut))
		require.Equal(t, 10, countStatus(t, f, record.StatusInProgress))
		require.Equal(t, expired, countEntries(t, st, "", "timed_out"))
		// Every timed-out action has its intent and a timed_out entry, so
		// this total leaves exactly two entries each.
		require.Equal(t, 2*expired+10, countEntries(t, st, "", ""))
		msgs, err := st.CountMessages(ctx, "", record.EventTimedOut)
		require.NoError(t, err)
		require.Equal(t, expired, msgs)
		require.Equal(t, expired, mustCount(t, st, "webhook_deliveries"))
		page, err := f.l.List(ctx, f.agent, services.ActionFilter{Statuses: []record.Status{"timed_out"}, Limit: 50})
		require.NoError(t, err)
		require.Len(t, page.Actions, 50)
		for _, a := range page.Actions {
			require.Equal(t, 2, a.Version, "timed out once")
			require.Equal(t, 2, countEntries(t, st, a.ID, ""))
		}
	})
}
