package services_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
	"github.com/arbiter-ledger/arbiter/services/driver"
	"github.com/arbiter-ledger/arbiter/services/record"
	"github.com/arbiter-ledger/arbiter/services/webhooks"
	"github.com/arbiter-ledger/arbiter/services/webhooks/webhookstest"
)

// bulkDesk is a namespace with timed-out refunds and a few other actions,
// for bulk decisions.
type bulkDesk struct {
	*fixture
	timedOut  []*record.Action // keyed refunds, timed out
	succeeded *record.Action
	failed    *record.Action // an unkeyed email that failed for good
}

// newBulkDesk records n keyed refunds that time out, one succeeded refund
// and one failed unkeyed email.
func newBulkDesk(t *testing.T, st *services.Store, n int) *bulkDesk {
	t.Helper()
	f := newFixture(t, st, FixtureOpts{})
	raws := make([]string, 0, n+4)
	for i := range n {
		raws = append(raws, intent(IntentOpts{Key: fmt.Sprintf("refund:%d", i)}))
	}
	raws = append(raws,
		intent(IntentOpts{Key: "refund:done", Timeout: 3600}),
		`{"key":"refund:done","type":"succeeded","attempt":1}`,
		intent(IntentOpts{Key: "email:1", Tool: "email.send", Effect: "unkeyed", Timeout: 3600}),
		`{"key":"email:1","type":"failed","attempt":1,"error":"mailbox full"}`)
	for _, r := range submitAll(t, f.l, f.agent, raws...) {
		require.NotEqual(t, record.OutcomeRejected, r.Outcome, "%+v", r.Error)
	}
	f.clock.Advance(61 * time.Second)
	swept, err := f.l.Sweep(context.Background())
	require.NoError(t, err)
	require.Equal(t, n, swept)
	d := &bulkDesk{fixture: f, succeeded: f.action(t, "refund:done"), failed: f.action(t, "email:1")}
	for i := range n {
		a := f.action(t, fmt.Sprintf("refund:%d", i))
		require.Equal(t, record.StatusTimedOut, a.Status)
		d.timedOut = append(d.timedOut, a)
	}
	return d
}

func ids(as ...*record.Action) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.ID
	}
	return out
}

func maxCount(n int) *int { return &n }

// written counts what a bulk decision may write: entries and outbox
// messages.
func written(t *testing.T, st *services.Store) [2]int {
	t.Helper()
	m, err := st.CountMessages(context.Background(), "", "")
	require.NoError(t, err)
	return [2]int{countEntries(t, st, "", ""), m}
}

// subscribe adds a webhook endpoint for decisions and time-outs, so that
// their alerts are written to the outbox and can be counted.
func subscribe(t *testing.T, st *services.Store) {
	t.Helper()
	url, events := "http://127.0.0.1:9/", []record.EventType{record.EventDecided, record.EventTimedOut}
	_, err := webhooks.New(st, webhooks.Config{Policy: webhooks.AddressPolicy{AllowPrivate: true}}).CreateEndpoint(context.Background(), webhookstest.Admin(),
		webhooks.EndpointInput{URL: &url, EventTypes: &events})
	require.NoError(t, err)
}

func TestBulkDryRunWritesNothing(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		ctx := context.Background()
		subscribe(t, st)
		d := newBulkDesk(t, st, 25)
		before := written(t, st)

		// A dry run needs neither a reason nor max_count.
		ans, err := d.l.DecideMany(ctx, d.operator, services.BulkInput{DryRun: true, Decision: "abandon",
			Filter: &services.BulkFilter{Status: []record.Status{"timed_out", "succeeded", "failed"}}})
		require.NoError(t, err)
		require.Nil(t, ans.Result)
		pv := ans.Preview
		require.Equal(t, 27, pv.Matched)
		require.Equal(t, 26, pv.Allowed, "abandon is allowed on the timed-out refunds and the failed email, not on the succeeded refund")
		require.Len(t, pv.Sample, services.BulkSampleSize)
		for _, a := range pv.Sample {
			require.Contains(t, []record.Status{"timed_out", "failed"}, a.Status)
		}
		require.Equal(t, []services.BulkSkip{{ID: d.succeeded.ID, Code: "invalid_transition"}}, pv.Skipped)

		// The unkeyed email cannot be retried without the acknowledgement;
		// the dry run counts exactly what the real request would do.
		ans, err = d.l.DecideMany(ctx, d.operator, services.BulkInput{DryRun: true, Decision: "retry",
			Filter: &services.BulkFilter{IDs: ids(d.failed, d.timedOut[0])}})
		require.NoError(t, err)
		require.Equal(t, 2, ans.Preview.Matched)
		require.Equal(t, 1, ans.Preview.Allowed)
		require.Equal(t, []services.BulkSkip{{ID: d.failed.ID, Code: "duplicate_risk_unacknowledged"}}, ans.Preview.Skipped)

		require.Equal(t, before, written(t, st), "a dry run writes nothing")
		for _, a := range d.timedOut {
			require.Equal(t, record.StatusTimedOut, d.action(t, a.Key).Status)
		}
	})
}

// TestBulkDecisionDecidesEachAsIfAlone: every allowed action gets its own
// decision entry and action.decided alert, once, with the operator and the
// reason; the others are skipped with the code a single decision would get.
func TestBulkDecisionDecidesEachAsIfAlone(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		ctx := context.Background()
		subscribe(t, st)
		d := newBulkDesk(t, st, 30)
		d.clock.Advance(time.Minute)
		before := written(t, st)

		ans, err := d.l.DecideMany(ctx, d.operator, services.BulkInput{Decision: "abandon", Reason: "PSP outage: none went out",
			MaxCount: maxCount(31), Filter: &services.BulkFilter{Status: []record.Status{"timed_out", "succeeded", "failed"}}})
		require.NoError(t, err)
		require.Nil(t, ans.Preview)
		require.Equal(t, 31, ans.Result.Applied)
		require.Equal(t, []services.BulkSkip{{ID: d.succeeded.ID, Code: "invalid_transition"}}, ans.Result.Skipped)
		require.Equal(t, [2]int{before[0] + 31, before[1] + 31}, written(t, st), "one entry and one alert per action")

		for _, a := range append(d.timedOut, d.failed) {
			got := d.action(t, a.Key)
			require.Equal(t, record.StatusAbandoned, got.Status)
			require.Equal(t, a.Version+1, got.Version)
			require.True(t, d.clock.Now().Equal(got.UpdatedAt))
			es := d.entries(t, a.ID)
			last := es[len(es)-1]
			require.Equal(t, record.TypeDecision, last.Type)
			require.Equal(t, actorOf(d.operator), last.Actor)
			require.Equal(t, a.Attempt, *last.Attempt)
			require.JSONEq(t, `{"decision":"abandon","reason":"PSP outage: none went out"}`, sansVia(t, last.Payload))
			require.Equal(t, 1, countEntries(t, st, a.ID, record.TypeDecision))
			n, err := st.CountMessages(ctx, a.ID, record.EventDecided)
			require.NoError(t, err)
			require.Equal(t, 1, n, "one action.decided alert for %s", a.Key)
			seqs, err := st.MessageEntrySeqs(ctx, a.ID)
			require.NoError(t, err)
			require.Contains(t, seqs, last.Seq, "the alert names its own entry")
		}
		require.Equal(t, record.StatusSucceeded, d.action(t, "refund:done").Status)

		// Again: nothing is allowed any more, so nothing is written.
		after := written(t, st)
		ans, err = d.l.DecideMany(ctx, d.operator, services.BulkInput{Decision: "abandon", Reason: "again",
			MaxCount: maxCount(1), Filter: &services.BulkFilter{IDs: ids(d.timedOut[:3]...)}})
		require.NoError(t, err)
		require.Zero(t, ans.Result.Applied)
		require.Len(t, ans.Result.Skipped, 3)
		for _, s := range ans.Result.Skipped {
			require.Equal(t, "invalid_transition", s.Code)
		}
		require.Equal(t, after, written(t, st))
	})
}

func TestBulkMaxCountRefuses(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		ctx := context.Background()
		d := newBulkDesk(t, st, 5)
		before := written(t, st)
		in := services.BulkInput{Decision: "confirm", Reason: "seen in the PSP", MaxCount: maxCount(4),
			Filter: &services.BulkFilter{Tool: "payments.refund"}}
		_, err := d.l.DecideMany(ctx, d.operator, in)
		e, ok := services.AsError(err)
		require.True(t, ok, "%v", err)
		require.Equal(t, "too_many_matched", e.Code)
		require.Contains(t, e.Message, "allowed on 5 of the 6 actions matched, more than max_count 4")
		require.Equal(t, before, written(t, st), "nothing written")
		for _, a := range d.timedOut {
			require.Equal(t, record.StatusTimedOut, d.action(t, a.Key).Status)
		}

		in.MaxCount = maxCount(5)
		ans, err := d.l.DecideMany(ctx, d.operator, in)
		require.NoError(t, err)
		require.Equal(t, 5, ans.Result.Applied)
		require.Equal(t, []services.BulkSkip{{ID: d.succeeded.ID, Code: "invalid_transition"}}, ans.Result.Skipped)
	})
}

// TestBulkFilterNarrows: every criterion given must hold; ids that name no
// action the caller can see are reported not_found.
func TestBulkFilterNarrows(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		ctx := context.Background()
		d := newBulkDesk(t, st, 4)
		dry := func(f services.BulkFilter) *services.BulkPreview {
			t.Helper()
			ans, err := d.l.DecideMany(ctx, d.operator, services.BulkInput{DryRun: true, Decision: "abandon", Filter: &f})
			require.NoError(t, err)
			return ans.Preview
		}
		created := d.timedOut[0].CreatedAt
		later := created.Add(time.Second)
		for name, tc := range map[string]struct {
			f                services.BulkFilter
			matched, allowed int
		}{
			"tool":                {services.BulkFilter{Tool: "email.send"}, 1, 1},
			"agent":               {services.BulkFilter{Agent: "refund-bot"}, 6, 5},
			"unknown agent":       {services.BulkFilter{Agent: "nobody"}, 0, 0},
			"namespace":           {services.BulkFilter{Namespace: d.ns}, 6, 5},
			"since":               {services.BulkFilter{Since: &later}, 0, 0},
			"until":               {services.BulkFilter{Until: &later}, 6, 5},
			"until excludes":      {services.BulkFilter{Until: &created}, 0, 0},
			"ids and status":      {services.BulkFilter{IDs: ids(d.timedOut[0], d.succeeded), Status: []record.Status{"timed_out"}}, 1, 1},
			"ids repeated":        {services.BulkFilter{IDs: ids(d.timedOut[0], d.timedOut[0], d.timedOut[1])}, 2, 2},
			"ids in capitals":     {services.BulkFilter{IDs: []string{strings.ToUpper(d.timedOut[0].ID)}}, 1, 1},
			"status and tool":     {services.BulkFilter{Status: []record.Status{"failed"}, Tool: "payments.refund"}, 0, 0},
			"dashboard key match": {services.BulkFilter{Search: "refund:2"}, 1, 1},
		} {
			t.Run(name, func(t *testing.T) {
				pv := dry(tc.f)
				require.Equal(t, tc.matched, pv.Matched)
				require.Equal(t, tc.allowed, pv.Allowed)
				require.Len(t, pv.Sample, tc.allowed)
			})
		}

		missing := driver.NewID()
		ans, err := d.l.DecideMany(ctx, d.operator, services.BulkInput{Decision: "abandon", Reason: "r", MaxCount: maxCount(10),
			Filter: &services.BulkFilter{IDs: []string{d.timedOut[0].ID, missing}}})
		require.NoError(t, err)
		require.Equal(t, 1, ans.Result.Applied)
		require.Equal(t, []services.BulkSkip{{ID: missing, Code: "not_found"}}, ans.Result.Skipped)
	})
}

// TestBulkScoping: an operator key decides in its own namespace only, and
// ids of another namespace are never decided nor told apart from ids that
// do not exist; admins decide everywhere; other roles may not decide.
func TestBulkScoping(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		ctx := context.Background()
		mine := newBulkDesk(t, st, 2)
		theirs := newBulkDesk(t, st, 2)
		in := func(f services.BulkFilter) services.BulkInput {
			return services.BulkInput{Decision: "abandon", Reason: "r", MaxCount: maxCount(10), Filter: &f}
		}
		before := written(t, st)

		_, err := mine.l.DecideMany(ctx, mine.operator, in(services.BulkFilter{Namespace: theirs.ns}))
		require.ErrorIs(t, err, services.ErrNotFound)
		_, err = mine.l.DecideMany(ctx, mine.operator, in(services.BulkFilter{Namespace: "never-created"}))
		require.ErrorIs(t, err, services.ErrNotFound, "the same answer whether or not the namespace exists")

		ans, err := mine.l.DecideMany(ctx, mine.operator, in(services.BulkFilter{IDs: ids(theirs.timedOut...)}))
		require.NoError(t, err)
		require.Zero(t, ans.Result.Applied)
		require.ElementsMatch(t, []services.BulkSkip{{ID: theirs.timedOut[0].ID, Code: "not_found"},
			{ID: theirs.timedOut[1].ID, Code: "not_found"}}, ans.Result.Skipped)

		// Without a namespace, an operator's filter reads its own only.
		ans, err = mine.l.DecideMany(ctx, mine.operator, services.BulkInput{DryRun: true, Decision: "abandon",
			Filter: &services.BulkFilter{Status: []record.Status{"timed_out"}}})
		require.NoError(t, err)
		require.Equal(t, 2, ans.Preview.Matched)
		for _, a := range ans.Preview.Sample {
			require.Equal(t, mine.ns, a.Namespace)
		}

		for _, role := range []services.Role{services.RoleReader, services.RoleAgent} {
			p := principal(t, st, PrincipalOpts{Namespace: mine.ns, Role: role})
			_, err := mine.l.DecideMany(ctx, p, in(services.BulkFilter{Status: []record.Status{"timed_out"}}))
			require.ErrorIs(t, err, services.ErrForbidden, "%s", role)
			_, err = mine.l.DecideMany(ctx, p, services.BulkInput{DryRun: true, Decision: "abandon",
				Filter: &services.BulkFilter{Status: []record.Status{"timed_out"}}})
			require.ErrorIs(t, err, services.ErrForbidden, "%s, dry run", role)
		}
		require.Equal(t, before, written(t, st), "nothing written")

		admin := principal(t, st, PrincipalOpts{Role: services.RoleAdmin, Name: "root"})
		ans, err = mine.l.DecideMany(ctx, admin, in(services.BulkFilter{IDs: ids(append(mine.timedOut, theirs.timedOut...)...)}))
		require.NoError(t, err)
		require.Equal(t, 4, ans.Result.Applied)
		require.Empty(t, ans.Result.Skipped)
		require.Equal(t, record.StatusAbandoned, theirs.action(t, "refund:1").Status)
	})
}

// TestBulkBadInput: each refusal has its code and writes nothing.
func TestBulkBadInput(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		ctx := context.Background()
		d := newBulkDesk(t, st, 3)
		timedOut := &services.BulkFilter{Status: []record.Status{"timed_out"}}
		tooMany := make([]string, services.MaxBulkActions+1)
		for i := range tooMany {
			tooMany[i] = driver.NewID()
		}
		since := t0.Add(time.Hour)
		cases := []struct {
			name string
			in   services.BulkInput
			code string
			msg  string
		}{
			{"no filter", services.BulkInput{Decision: "abandon", Reason: "r", MaxCount: maxCount(5)}, "invalid", `"filter" is required`},
			{"empty filter", services.BulkInput{Filter: &services.BulkFilter{IDs: []string{}}, Decision: "abandon", Reason: "r", MaxCount: maxCount(5)}, "invalid", `"filter" is required`},
			{"empty filter, dry run", services.BulkInput{Filter: &services.BulkFilter{}, Decision: "abandon", DryRun: true}, "invalid", `"filter" is required`},
			{"no reason", services.BulkInput{Filter: timedOut, Decision: "abandon", MaxCount: maxCount(5)}, "invalid", `"reason" is required`},
			{"blank reason", services.BulkInput{Filter: timedOut, Decision: "abandon", Reason: "  ", MaxCount: maxCount(5)}, "invalid", `"reason" is required`},
			{"no max_count", services.BulkInput{Filter: timedOut, Decision: "abandon", Reason: "r"}, "invalid", `"max_count" is required`},
			{"max_count 0", services.BulkInput{Filter: timedOut, Decision: "abandon", Reason: "r", MaxCount: maxCount(0)}, "invalid", "between 1 and 1000"},
			{"max_count over 1000", services.BulkInput{Filter: timedOut, Decision: "abandon", Reason: "r", MaxCount: maxCount(1001)}, "invalid", "between 1 and 1000"},
			{"over 1000 ids", services.BulkInput{Filter: &services.BulkFilter{IDs: tooMany}, Decision: "abandon", Reason: "r", MaxCount: maxCount(1000)}, "invalid", "at most 1000"},
			{"over 1000 ids, dry run", services.BulkInput{Filter: &services.BulkFilter{IDs: tooMany}, Decision: "abandon", DryRun: true}, "invalid", "at most 1000"},
			{"malformed id", services.BulkInput{Filter: &services.BulkFilter{IDs: []string{d.timedOut[0].ID, "order-8812"}}, Decision: "abandon", Reason: "r", MaxCount: maxCount(5)}, "invalid", `filter.ids[1] "order-8812"`},
			{"unknown status", services.BulkInput{Filter: &services.BulkFilter{Status: []record.Status{"stuck"}}, Decision: "abandon", Reason: "r", MaxCount: maxCount(5)}, "invalid", `unknown status "stuck"`},
			{"since after until", services.BulkInput{Filter: &services.BulkFilter{Since: &since, Until: &t0}, Decision: "abandon", Reason: "r", MaxCount: maxCount(5)}, "invalid", "since must be before"},
			{"bad namespace", services.BulkInput{Filter: &services.BulkFilter{Namespace: "Not A Namespace"}, Decision: "abandon", Reason: "r", MaxCount: maxCount(5)}, "invalid", "namespace"},
			{"no decision", services.BulkInput{Filter: timedOut, Reason: "r", MaxCount: maxCount(5)}, "invalid", `"decision" is required`},
			{"unknown decision", services.BulkInput{Filter: timedOut, Decision: "undo", Reason: "r", MaxCount: maxCount(5)}, "invalid", `unknown decision "undo"`},
			{"acknowledgement on abandon", services.BulkInput{Filter: timedOut, Decision: "abandon", Reason: "r", AcknowledgeDuplicateRisk: true, MaxCount: maxCount(5)}, "invalid", "retry decisions only"},
			{"more allowed than max_count", services.BulkInput{Filter: timedOut, Decision: "abandon", Reason: "r", MaxCount: maxCount(2)}, "too_many_matched", "more than max_count 2"},
		}
		before := written(t, st)
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				ans, err := d.l.DecideMany(ctx, d.operator, tc.in)
				require.Nil(t, ans)
				e, ok := services.AsError(err)
				require.True(t, ok, "%v", err)
				require.Equal(t, tc.code, e.Code, e.Message)
				require.Contains(t, e.Message, tc.msg)
				require.Equal(t, before, written(t, st), "nothing written")
			})
		}
		// approve alone may go without a reason, as for single decisions.
		ans, err := d.l.DecideMany(ctx, d.operator, services.BulkInput{Filter: timedOut, Decision: "approve", MaxCount: maxCount(5)})
		require.NoError(t, err)
		require.Zero(t, ans.Result.Applied)
		require.Len(t, ans.Result.Skipped, 3)
	})
}

// TestBulkFilterMatchingTooManyIsRefused: a request reads at most
// MaxBulkExamined matching actions, and says so rather than deciding on
// part of them.
func TestBulkFilterMatchingTooManyIsRefused(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		ctx := context.Background()
		seeded, err := st.Seed(ctx, services.SeedRequest{Actions: services.MaxBulkExamined + 1, TimedOut: 10})
		require.NoError(t, err)
		l := services.NewLedger(st, services.LedgerConfig{})
		admin := principal(t, st, PrincipalOpts{Role: services.RoleAdmin, Name: "root"})
		_, err = l.DecideMany(ctx, admin, services.BulkInput{DryRun: true, Decision: "confirm",
			Filter: &services.BulkFilter{Namespace: seeded.Namespace}})
		e, ok := services.AsError(err)
		require.True(t, ok, "%v", err)
		require.Equal(t, "too_many_matched", e.Code)
		require.Contains(t, e.Message, "more than 10000 actions")

		ans, err := l.DecideMany(ctx, admin, services.BulkInput{DryRun: true, Decision: "confirm",
			Filter: &services.BulkFilter{Namespace: seeded.Namespace, Status: []record.Status{"timed_out"}}})
		require.NoError(t, err)
		require.Equal(t, 10, ans.Preview.Matched, "a narrower filter is read across pages of the list")
	})
}

// TestBulkDecisionLosesRacesAsVersionConflict: an action that changed
// between the bulk decision's read and its write is skipped as
// version_conflict, and the change that won stands alone.
func TestBulkDecisionLosesRacesAsVersionConflict(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		ctx := context.Background()
		d := newBulkDesk(t, st, 3)
		// Read as the bulk decision would, then another operator confirms
		// the second refund before it writes.
		_, _, err := d.l.Decide(ctx, d.operator, d.timedOut[1].ID, services.DecisionInput{Decision: "confirm", Reason: "seen in the PSP"})
		require.NoError(t, err)
		res, err := d.l.DecideManyAsOf(ctx, d.operator, d.timedOut, services.DecisionInput{Decision: "abandon", Reason: "outage"})
		require.NoError(t, err)
		require.Equal(t, 2, res.Applied)
		require.Equal(t, []services.BulkSkip{{ID: d.timedOut[1].ID, Code: "version_conflict"}}, res.Skipped)
		require.Equal(t, record.StatusConfirmed, d.action(t, "refund:1").Status)
		require.Equal(t, 1, countEntries(t, st, d.timedOut[1].ID, record.TypeDecision))
		require.Equal(t, record.StatusAbandoned, d.action(t, "refund:0").Status)
		require.Equal(t, record.StatusAbandoned, d.action(t, "refund:2").Status)
	})
}

// TestBulkAndSingleDecisionsNeverDoubleApply: bulk decisions race single
// decisions on the same actions, from both ends of the list; every action
// is decided exactly once, by one or the other, with one entry and one
// alert.
func TestBulkAndSingleDecisionsNeverDoubleApply(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		ctx := context.Background()
		subscribe(t, st)
		const n, chunk = 60, 6
		totalBulk, totalSingle := 0, 0
		for round := range 4 {
			d := newBulkDesk(t, st, n)
			var (
				wg           sync.WaitGroup
				mu           sync.Mutex
				single, bulk int
			)
			start := make(chan struct{})
			for i := range 3 { // single decisions, from the end of the list
				wg.Go(func() {
					<-start
					for k := n - 1 - i; k >= 0; k -= 3 {
						_, _, err := d.l.Decide(ctx, d.operator, d.timedOut[k].ID, services.DecisionInput{Decision: "confirm", Reason: "seen in the PSP"})
						if err == nil {
							mu.Lock()
							single++
							mu.Unlock()
							continue
						}
						if e, ok := services.AsError(err); !ok || (e.Code != "version_conflict" && e.Code != "invalid_transition") {
							t.Errorf("single decision on %s: %v", d.timedOut[k].Key, err)
						}
					}
				})
			}
			for i := range 2 { // bulk decisions of a few actions each, from the start
				wg.Go(func() {
					<-start
					for from := i * chunk; from < n; from += 2 * chunk {
						ans, err := d.l.DecideMany(ctx, d.operator, services.BulkInput{Decision: "abandon", Reason: "outage",
							MaxCount: maxCount(chunk), Filter: &services.BulkFilter{IDs: ids(d.timedOut[from : from+chunk]...)}})
						if err != nil {
							t.Errorf("bulk decision: %v", err)
							return
						}
						for _, s := range ans.Result.Skipped {
							if s.Code != "version_conflict" && s.Code != "invalid_transition" {
								t.Errorf("bulk decision skipped %s: %s", s.ID, s.Code)
							}
						}
						mu.Lock()
						bulk += ans.Result.Applied
						mu.Unlock()
					}
				})
			}
			close(start)
			wg.Wait()
			require.Equal(t, n, bulk+single, "round %d: every action decided once: %d in bulk, %d alone", round, bulk, single)
			abandoned := 0
			for _, a := range d.timedOut {
				got := d.action(t, a.Key)
				require.Contains(t, []record.Status{record.StatusAbandoned, record.StatusConfirmed}, got.Status)
				if got.Status == record.StatusAbandoned {
					abandoned++
				}
				require.Equal(t, a.Version+1, got.Version)
				require.Equal(t, 1, countEntries(t, st, a.ID, record.TypeDecision), "%s decided once", a.Key)
				m, err := st.CountMessages(ctx, a.ID, record.EventDecided)
				require.NoError(t, err)
				require.Equal(t, 1, m, "%s alerted once", a.Key)
			}
			require.Equal(t, bulk, abandoned)
			totalBulk, totalSingle = totalBulk+bulk, totalSingle+single
		}
		t.Logf("%s: %d decided in bulk, %d alone", st.Dialect, totalBulk, totalSingle)
	})
}
