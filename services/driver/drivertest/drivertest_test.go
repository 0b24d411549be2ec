// Package drivertest holds the one test suite every storage driver must
// pass: each test runs against PostgreSQL and SQLite (dbtest.Each), on a
// freshly migrated database, and calls the driver's operations directly.
package drivertest

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/arbiter-ledger/arbiter/services/accounts"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/models"
	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
	"github.com/arbiter-ledger/arbiter/services/driver"
	"github.com/arbiter-ledger/arbiter/services/record"
)

var t0 = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)

// opts describes an action for newAction; zero fields take defaults.
type opts struct {
	ns, key  string
	status   record.Status
	deadline *time.Time
	at       time.Time
}

// newAction is a change that creates an action as the ledger would.
func newAction(o opts) *driver.Change {
	if o.ns == "" {
		o.ns = "ns"
	}
	if o.status == "" {
		o.status = record.StatusInProgress
	}
	if o.at.IsZero() {
		o.at = t0
	}
	agent := "agent-1"
	one := 1
	a := &record.Action{ID: driver.NewID(), Namespace: o.ns, Key: o.key, Tool: "payments.refund",
		Effect: record.EffectKeyed, Status: o.status, Attempt: 1, Version: 1, LeaseUntil: o.deadline,
		Deadline: o.deadline, Agent: &agent, Params: json.RawMessage(`{"amount":5}`), Fingerprint: "fp-" + o.key,
		CreatedAt: o.at, UpdatedAt: o.at}
	return &driver.Change{Next: a, Entry: record.Entry{ID: driver.NewID(), Type: record.TypeIntent,
		Actor: record.Actor{Kind: record.ActorAgent, Name: agent}, Attempt: &one,
		Payload: json.RawMessage(`{"tool":"payments.refund","timeout":300}`), RecordedAt: o.at}}
}

// update is a change of prev to status, with alerts of the given types.
func update(prev *record.Action, status record.Status, at time.Time, events ...record.EventType) *driver.Change {
	n := prev.Clone()
	n.Status, n.Version, n.UpdatedAt, n.Deadline, n.LeaseUntil = status, prev.Version+1, at, nil, nil
	e := record.Entry{ID: driver.NewID(), Type: record.TypeTimedOut, Actor: record.Actor{Kind: record.ActorSystem, Name: "sweeper"},
		Attempt: &n.Attempt, Payload: json.RawMessage(`{"lease_until":null}`), RecordedAt: at}
	ch := &driver.Change{Prev: prev, Next: n, Entry: e}
	for _, ev := range events {
		body, _ := json.Marshal(services.MessageBody{Type: ev, Timestamp: at, Data: services.MessageData{Action: n, Entry: &e}})
		ch.Alerts = append(ch.Alerts, driver.Alert{ID: driver.NewID(), Type: ev, Payload: body})
	}
	return ch
}

// setup opens a fresh database with namespace "ns" and returns its driver.
func setup(t *testing.T, st *services.Store) (context.Context, driver.Driver) {
	ctx := context.Background()
	require.NoError(t, accounts.NewKeys(st).EnsureNamespace(ctx, "ns"))
	require.NoError(t, accounts.NewKeys(st).EnsureNamespace(ctx, "other"))
	return ctx, st.Driver()
}

func insert(t *testing.T, ctx context.Context, ex driver.Executor, chs ...*driver.Change) []bool {
	t.Helper()
	written, err := ex.ActionInsertMany(ctx, chs)
	require.NoError(t, err)
	return written
}

func TestInsertManyWritesNewKeysOnce(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		ctx, d := setup(t, st)
		ex := d.Executor()
		a, b, again := newAction(opts{key: "k-a"}), newAction(opts{key: "k-b"}), newAction(opts{key: "k-a"})
		require.Equal(t, []bool{true, true, false}, insert(t, ctx, ex, a, b, again), "the second change for one key is not written")
		require.Equal(t, 1, a.Entry.Seq)
		require.Equal(t, 1, a.Next.EntrySeq)

		got, err := ex.ActionGetByKey(ctx, "ns", "k-a")
		require.NoError(t, err)
		require.Equal(t, a.Next.ID, got.ID)
		require.Equal(t, record.StatusInProgress, got.Status)
		require.Equal(t, "fp-k-a", got.Fingerprint)
		require.Equal(t, 1, got.Version)
		require.JSONEq(t, `{"amount":5}`, string(got.Params))

		byID, err := ex.ActionGetByID(ctx, a.Next.ID)
		require.NoError(t, err)
		require.Equal(t, got, byID)

		require.Equal(t, []bool{false}, insert(t, ctx, ex, newAction(opts{key: "k-b"})), "a key that exists is left alone")
		require.Equal(t, []bool{true}, insert(t, ctx, ex, newAction(opts{ns: "other", key: "k-b"})), "keys are per namespace")

		es, err := ex.EntryList(ctx, &driver.EntryListParams{ActionID: a.Next.ID})
		require.NoError(t, err)
		require.Len(t, es, 1)
		require.Equal(t, record.TypeIntent, es[0].Type)
		require.Equal(t, 1, es[0].Seq)
		require.Equal(t, record.ActorAgent, es[0].Actor.Kind)

		_, err = ex.ActionGetByKey(ctx, "ns", "missing")
		require.ErrorIs(t, err, driver.ErrNotFound)
		_, err = ex.ActionGetByID(ctx, driver.NewID())
		require.ErrorIs(t, err, driver.ErrNotFound)
	})
}

func TestUpdateManyIsConditionalOnVersion(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		ctx, d := setup(t, st)
		ex := d.Executor()
		a, b := newAction(opts{key: "k-a"}), newAction(opts{key: "k-b"})
		insert(t, ctx, ex, a, b)
		staleB := b.Next.Clone()
		staleB.Version = 7 // as if read before other writers moved it on
		at := t0.Add(time.Minute)
		chs := []*driver.Change{update(a.Next, record.StatusTimedOut, at), update(staleB, record.StatusTimedOut, at)}
		written, err := ex.ActionUpdateMany(ctx, chs)
		require.NoError(t, err)
		require.Equal(t, []bool{true, false}, written)
		require.Equal(t, 2, chs[0].Entry.Seq, "every change bumps the entry sequence")

		got, err := ex.ActionGetByKey(ctx, "ns", "k-a")
		require.NoError(t, err)
		require.Equal(t, record.StatusTimedOut, got.Status)
		require.Equal(t, 2, got.Version)
		require.Equal(t, 2, got.EntrySeq)
		require.Nil(t, got.Deadline)
		require.True(t, got.UpdatedAt.Equal(at))
		untouched, err := ex.ActionGetByKey(ctx, "ns", "k-b")
		require.NoError(t, err)
		require.Equal(t, record.StatusInProgress, untouched.Status)
		es, err := ex.EntryList(ctx, &driver.EntryListParams{ActionID: b.Next.ID})
		require.NoError(t, err)
		require.Len(t, es, 1, "a change that lost its race appends no entry")

		// Inside a transaction that rolls back, nothing stays.
		tx, err := d.Begin(ctx)
		require.NoError(t, err)
		written, err = tx.ActionUpdateMany(ctx, []*driver.Change{update(untouched, record.StatusAbandoned, at)})
		require.NoError(t, err)
		require.Equal(t, []bool{true}, written)
		inTx, err := tx.ActionGetByKey(ctx, "ns", "k-b")
		require.NoError(t, err)
		require.Equal(t, record.StatusAbandoned, inTx.Status, "a transaction reads its own writes")
		require.NoError(t, tx.Rollback())
		after, err := ex.ActionGetByKey(ctx, "ns", "k-b")
		require.NoError(t, err)
		require.Equal(t, record.StatusInProgress, after.Status)
	})
}

// endpoint subscribes an enabled endpoint to events in every namespace.
func endpoint(t *testing.T, d driver.Driver, events ...record.EventType) string {
	raw, _ := json.Marshal(events)
	m := models.WebhookEndpoint{ID: driver.NewID(), URL: "https://receiver.example/hook", EventTypes: string(raw),
		Namespaces: "[]", Format: "standard", Enabled: true, Secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
		CreatedAt: t0, UpdatedAt: t0}
	require.NoError(t, d.GormWriter().Create(&m).Error)
	return m.ID
}

type message struct {
	EventType string
	Payload   string
}

func messages(t *testing.T, d driver.Driver, actionID string) []message {
	var out []message
	require.NoError(t, d.Gorm().Raw(`SELECT event_type, CAST(payload AS text) AS payload FROM webhook_messages
		WHERE CAST(action_id AS text) = ? ORDER BY event_type`, actionID).Scan(&out).Error)
	return out
}

func TestAlertsAreWrittenWithTheirChange(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		ctx, d := setup(t, st)
		ex := d.Executor()
		endpoint(t, d, record.EventTimedOut, record.EventKeyReused)

		// A new action's alerts, with the entry's seq filled in.
		a := newAction(opts{key: "k-a"})
		body, _ := json.Marshal(services.MessageBody{Type: record.EventKeyReused, Data: services.MessageData{Entry: &a.Entry}})
		a.Alerts = []driver.Alert{{ID: driver.NewID(), Type: record.EventKeyReused, Payload: body},
			{ID: driver.NewID(), Type: record.EventDecided, Payload: body}}
		insert(t, ctx, ex, a)
		ms := messages(t, d, a.Next.ID)
		require.Len(t, ms, 1, "a message no endpoint subscribes to is not written")
		require.Equal(t, string(record.EventKeyReused), ms[0].EventType)
		var got services.MessageBody
		require.NoError(t, json.Unmarshal([]byte(ms[0].Payload), &got))
		require.Equal(t, 1, got.Data.Entry.Seq)

		// An update's alerts: one delivery per subscribed endpoint.
		endpoint(t, d, record.EventTimedOut)
		ch := update(a.Next, record.StatusTimedOut, t0.Add(time.Minute), record.EventTimedOut, record.EventDecided)
		_, err := ex.ActionUpdateMany(ctx, []*driver.Change{ch})
		require.NoError(t, err)
		ms = messages(t, d, a.Next.ID)
		require.Len(t, ms, 2)
		require.Equal(t, string(record.EventTimedOut), ms[1].EventType)
		require.NoError(t, json.Unmarshal([]byte(ms[1].Payload), &got))
		require.Equal(t, 2, got.Data.Entry.Seq)
		var deliveries int
		require.NoError(t, d.Gorm().Raw(`SELECT count(*) FROM webhook_deliveries d JOIN webhook_messages m
			ON m.id = d.message_id WHERE m.event_type = ?`, string(record.EventTimedOut)).Scan(&deliveries).Error)
		require.Equal(t, 2, deliveries)

		claimed, err := ex.DeliveryClaim(ctx, &driver.DeliveryClaimParams{Token: driver.NewID(), Now: time.Now(),
			Until: time.Now().Add(time.Minute), Limit: 10, PerEndpoint: 10, Busy: map[string]int{}})
		require.NoError(t, err)
		require.Len(t, claimed, 3, "every due delivery is claimed once")
		again, err := ex.DeliveryClaim(ctx, &driver.DeliveryClaimParams{Token: driver.NewID(), Now: time.Now(),
			Until: time.Now().Add(time.Minute), Limit: 10, PerEndpoint: 10, Busy: map[string]int{}})
		require.NoError(t, err)
		require.Empty(t, again, "a claimed delivery is leased")
	})
}

func TestDueListReadsPassedDeadlinesInOrder(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		ctx, d := setup(t, st)
		ex := d.Executor()
		var chs []*driver.Change
		for i := range 5 {
			at := t0.Add(time.Duration(5-i) * time.Second) // created in reverse deadline order
			chs = append(chs, newAction(opts{key: fmt.Sprintf("k-%d", i), deadline: &at}))
		}
		later := t0.Add(time.Hour)
		chs = append(chs, newAction(opts{key: "later", deadline: &later}), newAction(opts{key: "none"}))
		insert(t, ctx, ex, chs...)

		now := t0.Add(time.Minute)
		due, err := ex.ActionDueList(ctx, &driver.ActionDueListParams{Now: now, Limit: 3})
		require.NoError(t, err)
		require.Equal(t, []string{"k-4", "k-3", "k-2"}, keys(due))
		rest, err := ex.ActionDueList(ctx, &driver.ActionDueListParams{Now: now, After: due[2], Limit: 3})
		require.NoError(t, err)
		require.Equal(t, []string{"k-1", "k-0"}, keys(rest), "a later batch starts after the last one read")
		require.True(t, due[0].Deadline.Equal(t0.Add(time.Second)))
	})
}

func keys(as []*record.Action) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.Key
	}
	return out
}

func TestListTriageAndPrune(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		ctx, d := setup(t, st)
		ex := d.Executor()
		chs := []*driver.Change{
			newAction(opts{key: "run", at: t0}),
			newAction(opts{key: "late", status: record.StatusTimedOut, at: t0.Add(time.Second)}),
			newAction(opts{key: "done", status: record.StatusSucceeded, at: t0.Add(2 * time.Second)}),
			newAction(opts{ns: "other", key: "elsewhere", status: record.StatusTimedOut, at: t0.Add(3 * time.Second)}),
		}
		insert(t, ctx, ex, chs...)

		all, err := ex.ActionList(ctx, &driver.ActionListParams{Limit: 10})
		require.NoError(t, err)
		require.Len(t, all, 4)
		ns, err := ex.ActionList(ctx, &driver.ActionListParams{Namespace: "ns", Statuses: []record.Status{record.StatusTimedOut, record.StatusSucceeded}, Limit: 10})
		require.NoError(t, err)
		require.ElementsMatch(t, []string{"late", "done"}, keys(ns))
		found, err := ex.ActionList(ctx, &driver.ActionListParams{Search: "done", Limit: 10})
		require.NoError(t, err)
		require.Equal(t, []string{"done"}, keys(found))
		byIDs, err := ex.ActionList(ctx, &driver.ActionListParams{IDs: []string{chs[0].Next.ID, chs[1].Next.ID,
			chs[3].Next.ID, driver.NewID()}, Limit: 10})
		require.NoError(t, err)
		require.Equal(t, []string{"elsewhere", "late", "run"}, keys(byIDs), "the ids that exist, newest first")
		byIDs, err = ex.ActionList(ctx, &driver.ActionListParams{Namespace: "ns", Statuses: []record.Status{record.StatusTimedOut},
			IDs: []string{chs[0].Next.ID, chs[1].Next.ID, chs[3].Next.ID}, Limit: 10})
		require.NoError(t, err)
		require.Equal(t, []string{"late"}, keys(byIDs), "ids narrowed by the other criteria")

		p := &driver.TriageParams{Namespace: "ns", Statuses: []record.Status{record.StatusTimedOut}, Limit: 10,
			AlertTypes: []record.EntryType{record.TypeKeyReused}, Since: t0.Add(-time.Hour)}
		counts, err := ex.TriageCounts(ctx, p)
		require.NoError(t, err)
		require.Equal(t, map[record.Status]int64{record.StatusTimedOut: 1}, counts)
		waiting, err := ex.TriageWaiting(ctx, p)
		require.NoError(t, err)
		require.Equal(t, []string{"late"}, keys(waiting))
		before, err := ex.TriageStamp(ctx, p)
		require.NoError(t, err)
		_, err = ex.ActionUpdateMany(ctx, []*driver.Change{update(chs[0].Next, record.StatusTimedOut, t0.Add(time.Hour))})
		require.NoError(t, err)
		after, err := ex.TriageStamp(ctx, p)
		require.NoError(t, err)
		require.NotEqual(t, before, after, "the stamp moves when the queue changes")

		byStatus, err := ex.ActionCountByStatus(ctx)
		require.NoError(t, err)
		require.Equal(t, map[record.Status]int64{record.StatusTimedOut: 3, record.StatusSucceeded: 1}, byStatus)

		n, err := ex.ActionPrune(ctx, &driver.PruneParams{Statuses: record.TerminalStatuses, Before: t0.Add(time.Minute), Limit: 10})
		require.NoError(t, err)
		require.EqualValues(t, 1, n, "only terminal actions older than the horizon go")
		_, err = ex.ActionGetByKey(ctx, "ns", "done")
		require.ErrorIs(t, err, driver.ErrNotFound)
	})
}

// TestPruneInBatches: batches of retention, each starting where the last
// one ended, take every terminal action past the horizon with its entries,
// also when a batch ends among actions last changed at the same instant,
// and leave the rest.
func TestPruneInBatches(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		ctx, d := setup(t, st)
		ex := d.Executor()
		var chs []*driver.Change
		for i, at := range []time.Duration{0, 0, 0, time.Second, time.Second, 2 * time.Second, 2 * time.Second} {
			chs = append(chs, newAction(opts{key: fmt.Sprintf("done-%d", i), status: record.StatusSucceeded, at: t0.Add(at)}))
		}
		chs = append(chs, newAction(opts{key: "waiting", status: record.StatusTimedOut, at: t0}),
			newAction(opts{key: "recent", status: record.StatusSucceeded, at: t0.Add(time.Hour)}))
		insert(t, ctx, ex, chs...)

		p := &driver.PruneParams{Statuses: record.TerminalStatuses, Before: t0.Add(time.Minute), Limit: 2}
		var total int64
		for batches := 1; ; batches++ {
			require.LessOrEqual(t, batches, 10, "batches end")
			n, err := ex.ActionPrune(ctx, p)
			require.NoError(t, err)
			total += n
			if n < int64(p.Limit) {
				break
			}
		}
		require.EqualValues(t, 7, total)
		for _, ch := range chs {
			_, err := ex.ActionGetByID(ctx, ch.Next.ID)
			es, lerr := ex.EntryList(ctx, &driver.EntryListParams{ActionID: ch.Next.ID})
			require.NoError(t, lerr)
			if ch.Next.Key == "waiting" || ch.Next.Key == "recent" {
				require.NoError(t, err, ch.Next.Key)
				require.Len(t, es, 1, ch.Next.Key)
				continue
			}
			require.ErrorIs(t, err, driver.ErrNotFound, ch.Next.Key)
			require.Empty(t, es, "the entries of %s go with it", ch.Next.Key)
		}
	})
}

func TestOutcomeExistsFindsLateResults(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		ctx, d := setup(t, st)
		ex := d.Executor()
		a := newAction(opts{key: "k"})
		insert(t, ctx, ex, a)
		ch := update(a.Next, record.StatusSucceeded, t0.Add(time.Minute))
		ch.Entry.Type, ch.Entry.Payload = record.TypeLateResult, json.RawMessage(`{"type":"succeeded"}`)
		_, err := ex.ActionUpdateMany(ctx, []*driver.Change{ch})
		require.NoError(t, err)
		for typ, want := range map[record.EntryType]bool{record.TypeSucceeded: true, record.TypeFailed: false} {
			found, err := ex.EntryOutcomeExists(ctx, &driver.EntryOutcomeExistsParams{ActionID: a.Next.ID, Attempt: 1, Type: typ})
			require.NoError(t, err)
			require.Equal(t, want, found, typ)
		}
		n, err := ex.EntryCountByType(ctx, record.TypeLateResult)
		require.NoError(t, err)
		require.Equal(t, 1, n)
	})
}

func TestLeftStatusNamesActionsNoLongerInIt(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		ctx, d := setup(t, st)
		ex := d.Executor()
		waiting := newAction(opts{key: "k-wait", status: record.StatusAwaitingApproval})
		decided := newAction(opts{key: "k-decided", status: record.StatusApproved})
		require.Equal(t, []bool{true, true}, insert(t, ctx, ex, waiting, decided))
		missing := driver.NewID()
		left, err := ex.ActionLeftStatus(ctx, []string{waiting.Next.ID, decided.Next.ID, missing}, record.StatusAwaitingApproval)
		require.NoError(t, err)
		require.ElementsMatch(t, []string{decided.Next.ID, missing}, left, "the decided action and the one that is not there")
		left, err = ex.ActionLeftStatus(ctx, []string{waiting.Next.ID}, record.StatusAwaitingApproval)
		require.NoError(t, err)
		require.Empty(t, left)
	})
}
