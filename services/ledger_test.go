package services_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/arbiter-ledger/arbiter/services/accounts"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
	"github.com/arbiter-ledger/arbiter/services/record"
)

// The ledger behaviour suite: every test runs against PostgreSQL and SQLite
// through dbtest.Each. This file holds the factories the suite shares and the
// agent side of SPEC's action-state and outcome tables ("Action states",
// "Agent wire contract").

// t0 is where every fake clock starts.
var t0 = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)

// clock is a fake clock the tests move by hand instead of sleeping.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: t0} }

// Now returns the current fake time, in UTC and at the database's
// microsecond precision, as the ledger's own clock does.
func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock on and returns the new time.
func (c *clock) Advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d).UTC().Truncate(time.Microsecond)
	return c.now
}

var namespaceSeq atomic.Int64

// freshNamespace returns a namespace name no other test uses.
func freshNamespace() string { return fmt.Sprintf("ns-%d", namespaceSeq.Add(1)) }

// PrincipalOpts describes an API key to create.
type PrincipalOpts struct {
	Namespace string        // default: a fresh namespace
	Name      string        // default: "<role>-bot"
	Role      services.Role // default: agent
	// Owner is the email of the user the key belongs to (created as an
	// operator if missing); empty for a key without an owner.
	Owner string
}

// principal creates an API key and returns the principal it authenticates as.
func principal(t *testing.T, st *services.Store, o PrincipalOpts) services.Principal {
	t.Helper()
	if o.Role == "" {
		o.Role = services.RoleAgent
	}
	if o.Namespace == "" && o.Role != services.RoleAdmin {
		o.Namespace = freshNamespace()
	}
	if o.Name == "" {
		o.Name = string(o.Role) + "-bot"
	}
	ctx := context.Background()
	keys := accounts.NewKeys(st)
	if o.Owner != "" {
		user(t, st, o.Owner, services.RoleOperator)
	}
	_, secret, err := keys.CreateKey(ctx, accounts.CreateKeyRequest{Namespace: o.Namespace, Name: o.Name, Role: o.Role,
		Owner: o.Owner})
	require.NoError(t, err)
	p, err := keys.Authenticate(ctx, secret)
	require.NoError(t, err)
	require.Equal(t, o.Role, p.Role)
	return p
}

// LedgerOpts configures a ledger under test.
type LedgerOpts struct {
	Clock  *clock // default: a new fake clock at t0
	Config services.LedgerConfig
}

func newLedger(st *services.Store, o LedgerOpts) (*services.Ledger, *clock) {
	if o.Clock == nil {
		o.Clock = newClock()
	}
	if o.Config.Now == nil {
		o.Config.Now = o.Clock.Now
	}
	return services.NewLedger(st, o.Config), o.Clock
}

// fixture is one namespace with an agent and an operator key, and a ledger
// on a fake clock.
type fixture struct {
	st       *services.Store
	l        *services.Ledger
	clock    *clock
	ns       string
	agent    services.Principal
	operator services.Principal
}

// FixtureOpts configures a fixture.
type FixtureOpts struct {
	Namespace string // default: a fresh namespace
	Clock     *clock // default: a new fake clock at t0
	Config    services.LedgerConfig
	Ledger    *services.Ledger
}

func newFixture(t *testing.T, st *services.Store, o FixtureOpts) *fixture {
	t.Helper()
	if o.Namespace == "" {
		o.Namespace = freshNamespace()
	}
	f := &fixture{st: st, ns: o.Namespace}
	f.l, f.clock = newLedger(st, LedgerOpts{Clock: o.Clock, Config: o.Config})
	if o.Ledger != nil {
		f.l = o.Ledger
	}
	f.agent = principal(t, st, PrincipalOpts{Namespace: o.Namespace, Name: "refund-bot", Role: services.RoleAgent})
	f.operator = principal(t, st, PrincipalOpts{Namespace: o.Namespace, Name: "ops-alice", Role: services.RoleOperator,
		Owner: "alice@example.com"})
	return f
}

// submit sends one entry and returns its result; the database must not fail.
func submit(t *testing.T, l *services.Ledger, p services.Principal, raw string) services.EntryResult {
	t.Helper()
	res := submitAll(t, l, p, raw)
	require.Len(t, res, 1)
	return res[0]
}

// submitAll sends entries as one request.
func submitAll(t *testing.T, l *services.Ledger, p services.Principal, raws ...string) []services.EntryResult {
	t.Helper()
	bs := make([][]byte, len(raws))
	for i, r := range raws {
		bs[i] = []byte(r)
	}
	res, err := l.Submit(context.Background(), p, bs)
	require.NoError(t, err)
	require.Len(t, res, len(raws))
	return res
}

// IntentOpts describes an intent entry.
type IntentOpts struct {
	Key     string        // default "k"
	Tool    string        // default "payments.refund"
	Effect  record.Effect // default "keyed"; "-" leaves the field out
	Params  string        // default {"order":"8812","amount":10}; "-" leaves the field out
	Timeout int           // default 60; negative leaves the field out
}

func intent(o IntentOpts) string {
	if o.Key == "" {
		o.Key = "k"
	}
	if o.Tool == "" {
		o.Tool = "payments.refund"
	}
	if o.Effect == "" {
		o.Effect = record.EffectKeyed
	}
	if o.Params == "" {
		o.Params = `{"order":"8812","amount":10}`
	}
	if o.Timeout == 0 {
		o.Timeout = 60
	}
	s := fmt.Sprintf(`{"key":%q,"type":"intent","tool":%q`, o.Key, o.Tool)
	if o.Effect != "-" {
		s += fmt.Sprintf(`,"effect":%q`, o.Effect)
	}
	if o.Params != "-" {
		s += `,"params":` + o.Params
	}
	if o.Timeout > 0 {
		s += fmt.Sprintf(`,"timeout":%d`, o.Timeout)
	}
	return s + "}"
}

// Entries on key "k" used by the tables.
var (
	intentK          = intent(IntentOpts{})
	succeeded1       = `{"key":"k","type":"succeeded","attempt":1,"result":{"refund":"re_1"},"external_ref":"re_1"}`
	succeeded2       = `{"key":"k","type":"succeeded","attempt":2,"result":{"refund":"re_2"}}`
	failed1          = `{"key":"k","type":"failed","attempt":1,"error":"card declined"}`
	failedRetriable1 = `{"key":"k","type":"failed","attempt":1,"error":"gateway timeout","retriable":true}`
	heartbeat1       = `{"key":"k","type":"heartbeat","attempt":1,"timeout":120}`
	compensated1     = `{"key":"k","type":"compensated","attempt":1,"external_ref":"rev_1"}`
	noteK            = `{"key":"k","type":"note","message":"customer called"}`
)

// op is one setup step that brings an action to the state a case starts in.
type op func(t *testing.T, f *fixture)

// send submits an entry that must not be rejected.
func send(raw string) op {
	return func(t *testing.T, f *fixture) {
		t.Helper()
		res := submit(t, f.l, f.agent, raw)
		require.NotEqual(t, record.OutcomeRejected, res.Outcome, "setup entry %s: %+v", raw, res.Error)
	}
}

// decided takes a decision on key "k" that must succeed.
func decided(decision record.Decision, mod ...func(*services.DecisionInput)) op {
	return func(t *testing.T, f *fixture) {
		t.Helper()
		d := services.DecisionInput{Decision: decision, Reason: "setup: " + string(decision)}
		for _, m := range mod {
			m(&d)
		}
		_, _, err := f.l.Decide(context.Background(), f.operator, f.action(t, "k").ID, d)
		require.NoError(t, err, "setup decision %s", decision)
	}
}

// wait moves the fake clock on.
func wait(d time.Duration) op {
	return func(t *testing.T, f *fixture) { f.clock.Advance(d) }
}

// swept runs the sweeper, which must time out at least one action.
func swept() op {
	return func(t *testing.T, f *fixture) {
		t.Helper()
		n, err := f.l.Sweep(context.Background())
		require.NoError(t, err)
		require.Positive(t, n)
	}
}

// then returns base followed by more, without sharing base's array.
func then(base []op, more ...op) []op {
	return append(slices.Clip(base), more...)
}

// Paths to every status of key "k" (keyed effect, lease 60 s), with the
// version and attempt each ends at noted.
var (
	toInProgress        = []op{send(intentK)}                                       // v1 a1
	toSucceeded         = then(toInProgress, send(succeeded1))                      // v2 a1
	toFailed            = then(toInProgress, send(failed1))                         // v2 a1
	toFailedRetriable   = then(toInProgress, send(failedRetriable1))                // v2 a1
	toAttempt2          = then(toFailedRetriable, send(intentK))                    // v3 a2
	toTimedOut          = then(toInProgress, wait(61*time.Second), swept())         // v2 a1
	toRetryRequested    = then(toTimedOut, decided("retry"))                        // v3 a1
	toRetryAfterFailure = then(toFailed, decided("retry"))                          // v3 a1
	toConfirmed         = then(toTimedOut, decided("confirm", withEvidence))        // v3 a1
	toCompRequested     = then(toSucceeded, decided("compensate"))                  // v3 a1
	toCompensated       = then(toCompRequested, send(compensated1))                 // v4 a1
	toMarkedCompensated = then(toCompRequested, decided("mark_compensated"))        // v4 a1
	toAbandoned         = then(toTimedOut, decided("abandon"))                      // v3 a1
	toLeasePassed       = then(toInProgress, wait(61*time.Second))                  // v1 a1, not swept
	toRetryThenLateFail = then(toRetryRequested, send(failed1))                     // v3 a1
	toSucceededLate     = then(toTimedOut, send(succeeded1))                        // v3 a1
	toCompensateLater   = then(toSucceeded, decided("compensate"), wait(time.Hour)) // v3 a1
	toAwaitingApproval  = []op{send(intentApproval)}                                // v1 a0
	toApproved          = then(toAwaitingApproval, decided("approve"))              // v2 a0
	toDenied            = then(toAwaitingApproval, decided("reject"))               // v2 a0
)

func withEvidence(d *services.DecisionInput) {
	ref := "re_9"
	d.ExternalRef = &ref
	d.Result = json.RawMessage(`{"refund":"re_9"}`)
}

func (f *fixture) action(t *testing.T, key string) *record.Action {
	t.Helper()
	a, err := f.l.ActionByKey(context.Background(), f.agent, "", key)
	require.NoError(t, err)
	return a
}

func (f *fixture) entries(t *testing.T, actionID string) []*record.Entry {
	t.Helper()
	es, err := f.l.Entries(context.Background(), f.agent, actionID)
	require.NoError(t, err)
	return es
}

// countEntries counts every entry in the database, or those of one type.
func countEntries(t *testing.T, st *services.Store, actionID string, typ record.EntryType) int {
	t.Helper()
	n, err := st.CountEntries(context.Background(), actionID, typ)
	require.NoError(t, err)
	return n
}

// wantEntry is an entry a case expects to be appended.
type wantEntry struct {
	typ     record.EntryType
	actor   record.ActorKind // agent, operator or system
	attempt int              // 0: the entry names no attempt
}

func requireEntries(t *testing.T, want []wantEntry, got []*record.Entry, now time.Time) {
	t.Helper()
	require.Len(t, got, len(want), "appended entries: %s", describeEntries(got))
	for i, w := range want {
		e := got[i]
		require.Equal(t, w.typ, e.Type, "entry %d type", i)
		require.Equal(t, w.actor, e.Actor.Kind, "entry %d actor kind", i)
		if w.attempt == 0 {
			require.Nil(t, e.Attempt, "entry %d attempt", i)
		} else {
			require.NotNil(t, e.Attempt, "entry %d attempt", i)
			require.Equal(t, w.attempt, *e.Attempt, "entry %d attempt", i)
		}
		require.True(t, e.RecordedAt.Equal(now), "entry %d recorded_at %s, want %s", i, e.RecordedAt, now)
	}
}

func describeEntries(es []*record.Entry) string {
	s := "["
	for _, e := range es {
		a := "-"
		if e.Attempt != nil {
			a = fmt.Sprint(*e.Attempt)
		}
		s += fmt.Sprintf(" %s/%s/%s", e.Type, e.Actor.Kind, a)
	}
	return s + " ]"
}

// Lease expectations after an entry.
const (
	leaseKept time.Duration = 0  // as it was before the entry
	leaseNone time.Duration = -1 // no lease
)

type entryWant struct {
	outcome record.Outcome
	code    string        // error code, "" for none
	status  record.Status // "" when no action may exist
	attempt int
	version int
	lease   time.Duration // leaseKept, leaseNone, or the lease from now
	result  string        // the action's result, "" for null
	entries []wantEntry   // appended by the entry
	// answerLease is the lease answered when it is not the action's (a
	// lookup's), from now; 0: the action's.
	answerLease time.Duration
	// check looks further at the stored action.
	check func(t *testing.T, a *record.Action)
}

type entryCase struct {
	name  string
	setup []op
	entry string
	want  entryWant
	skip  string
}

// entryCases cover SPEC's action-state table ("Action states") and outcome
// table ("Agent wire contract") from the agent's side, including late,
// stale and duplicate information.
var entryCases = []entryCase{
	// Intents.
	{name: "intent on a new key proceeds with attempt 1 and a lease", entry: intentK,
		want: entryWant{outcome: "proceed", status: "in_progress", attempt: 1, version: 1, lease: 60 * time.Second,
			entries: []wantEntry{{"intent", "agent", 1}}}},
	{name: "intent during a live lease is in_progress", setup: then(toInProgress, wait(30*time.Second)), entry: intentK,
		want: entryWant{outcome: "in_progress", status: "in_progress", attempt: 1, version: 1, lease: leaseKept}},
	{name: "intent after the lease passed, before the sweeper, is held", setup: toLeasePassed, entry: intentK,
		want: entryWant{outcome: "held", status: "in_progress", attempt: 1, version: 1, lease: leaseKept}},
	{name: "intent on timed_out is held", setup: toTimedOut, entry: intentK,
		want: entryWant{outcome: "held", status: "timed_out", attempt: 1, version: 2, lease: leaseKept}},
	{name: "intent on succeeded replays the saved result", setup: toSucceeded, entry: intentK,
		want: entryWant{outcome: "replay", status: "succeeded", attempt: 1, version: 2, lease: leaseNone, result: `{"refund":"re_1"}`}},
	{name: "intent on confirmed replays the confirmed evidence", setup: toConfirmed, entry: intentK,
		want: entryWant{outcome: "replay", status: "confirmed", attempt: 1, version: 3, lease: leaseKept, result: `{"refund":"re_9"}`}},
	{name: "intent on non-retriable failed replays", setup: toFailed, entry: intentK,
		want: entryWant{outcome: "replay", status: "failed", attempt: 1, version: 2, lease: leaseNone}},
	{name: "intent on compensated replays", setup: toCompensated, entry: intentK,
		want: entryWant{outcome: "replay", status: "compensated", attempt: 1, version: 4, lease: leaseNone, result: `{"refund":"re_1"}`}},
	{name: "intent on abandoned replays", setup: toAbandoned, entry: intentK,
		want: entryWant{outcome: "replay", status: "abandoned", attempt: 1, version: 3, lease: leaseKept}},
	{name: "intent on retriable failed proceeds with attempt 2", setup: toFailedRetriable, entry: intentK,
		want: entryWant{outcome: "proceed", status: "in_progress", attempt: 2, version: 3, lease: 60 * time.Second,
			entries: []wantEntry{{"intent", "agent", 2}}}},
	{name: "intent on retry_requested proceeds with attempt + 1", setup: toRetryRequested, entry: intentK,
		want: entryWant{outcome: "proceed", status: "in_progress", attempt: 2, version: 4, lease: 60 * time.Second,
			entries: []wantEntry{{"intent", "agent", 2}}}},
	{name: "intent on retry_requested after a failure proceeds", setup: toRetryAfterFailure, entry: intentK,
		want: entryWant{outcome: "proceed", status: "in_progress", attempt: 2, version: 4, lease: 60 * time.Second,
			entries: []wantEntry{{"intent", "agent", 2}}}},
	{name: "intent on compensation_requested says compensate with a lease", setup: toCompRequested, entry: intentK,
		want: entryWant{outcome: "compensate", status: "compensation_requested", attempt: 1, version: 4, lease: 60 * time.Second, result: `{"refund":"re_1"}`,
			entries: []wantEntry{{"intent", "agent", 1}}}},

	// Heartbeats.
	{name: "heartbeat extends the lease and bumps the version", setup: then(toInProgress, wait(30*time.Second)), entry: heartbeat1,
		want: entryWant{outcome: "recorded", status: "in_progress", attempt: 1, version: 2, lease: 120 * time.Second,
			entries: []wantEntry{{"heartbeat", "agent", 1}}}},
	{name: "heartbeat without timeout extends by the default 300 s", setup: toInProgress,
		entry: `{"key":"k","type":"heartbeat","attempt":1}`,
		want: entryWant{outcome: "recorded", status: "in_progress", attempt: 1, version: 2, lease: 300 * time.Second,
			entries: []wantEntry{{"heartbeat", "agent", 1}}}},
	{name: "heartbeat after the lease passed, before the sweeper, is lease_lost", setup: toLeasePassed, entry: heartbeat1,
		want: entryWant{outcome: "rejected", code: "lease_lost", status: "in_progress", attempt: 1, version: 1, lease: leaseKept,
			entries: []wantEntry{{"lease_lost", "agent", 1}}}},
	{name: "heartbeat on timed_out is lease_lost", setup: toTimedOut, entry: heartbeat1,
		want: entryWant{outcome: "rejected", code: "lease_lost", status: "timed_out", attempt: 1, version: 2, lease: leaseKept,
			entries: []wantEntry{{"lease_lost", "agent", 1}}}},

	// Outcomes for the current attempt.
	{name: "succeeded for the current attempt", setup: toInProgress, entry: succeeded1,
		want: entryWant{outcome: "recorded", status: "succeeded", attempt: 1, version: 2, lease: leaseNone, result: `{"refund":"re_1"}`,
			entries: []wantEntry{{"succeeded", "agent", 1}}}},
	{name: "failed for the current attempt", setup: toInProgress, entry: failed1,
		want: entryWant{outcome: "recorded", status: "failed", attempt: 1, version: 2, lease: leaseNone,
			entries: []wantEntry{{"failed", "agent", 1}}}},
	{name: "succeeded for attempt 2", setup: toAttempt2, entry: succeeded2,
		want: entryWant{outcome: "recorded", status: "succeeded", attempt: 2, version: 4, lease: leaseNone, result: `{"refund":"re_2"}`,
			entries: []wantEntry{{"succeeded", "agent", 2}}}},
	{name: "compensated from the agent", setup: toCompRequested, entry: compensated1,
		want: entryWant{outcome: "recorded", status: "compensated", attempt: 1, version: 4, lease: leaseNone, result: `{"refund":"re_1"}`,
			entries: []wantEntry{{"compensated", "agent", 1}}}},

	// Notes and unknown keys.
	{name: "note is recorded without changing the action", setup: toInProgress, entry: noteK,
		want: entryWant{outcome: "recorded", status: "in_progress", attempt: 1, version: 1, lease: leaseKept,
			entries: []wantEntry{{"note", "agent", 0}}}},
	{name: "note naming an attempt is recorded", setup: toSucceeded, entry: `{"key":"k","type":"note","attempt":1,"message":"refund visible in PSP"}`,
		want: entryWant{outcome: "recorded", status: "succeeded", attempt: 1, version: 2, lease: leaseNone, result: `{"refund":"re_1"}`,
			entries: []wantEntry{{"note", "agent", 1}}}},
	{name: "note on an unknown key is not_found", entry: noteK,
		want: entryWant{outcome: "rejected", code: "not_found"}},
	{name: "succeeded on an unknown key is not_found", entry: succeeded1,
		want: entryWant{outcome: "rejected", code: "not_found"}},
	{name: "failed on an unknown key is not_found", entry: failed1,
		want: entryWant{outcome: "rejected", code: "not_found"}},
	{name: "heartbeat on an unknown key is not_found", entry: heartbeat1,
		want: entryWant{outcome: "rejected", code: "not_found"}},
	{name: "compensated on an unknown key is not_found", entry: compensated1,
		want: entryWant{outcome: "rejected", code: "not_found"}},

	// Fencing.
	{name: "succeeded for an older attempt is stale", setup: toAttempt2, entry: succeeded1,
		want: entryWant{outcome: "rejected", code: "stale_attempt", status: "in_progress", attempt: 2, version: 3, lease: leaseKept,
			entries: []wantEntry{{"stale_outcome", "agent", 1}}}},
	{name: "failed for an older attempt is stale", setup: toAttempt2, entry: failed1,
		want: entryWant{outcome: "rejected", code: "stale_attempt", status: "in_progress", attempt: 2, version: 3, lease: leaseKept,
			entries: []wantEntry{{"stale_outcome", "agent", 1}}}},
	{name: "stale outcome after the newer attempt finished changes nothing", setup: then(toAttempt2, send(succeeded2)), entry: succeeded1,
		want: entryWant{outcome: "rejected", code: "stale_attempt", status: "succeeded", attempt: 2, version: 4, lease: leaseNone, result: `{"refund":"re_2"}`,
			entries: []wantEntry{{"stale_outcome", "agent", 1}}}},
	{name: "heartbeat for an older attempt is stale", setup: toAttempt2, entry: heartbeat1,
		want: entryWant{outcome: "rejected", code: "stale_attempt", status: "in_progress", attempt: 2, version: 3, lease: leaseKept,
			entries: []wantEntry{{"stale_heartbeat", "agent", 1}}}},
	{name: "intent with other params on a finished action is key_reused", setup: toSucceeded,
		entry: intent(IntentOpts{Params: `{"order":"8812","amount":12}`}),
		want: entryWant{outcome: "rejected", code: "key_reused", status: "succeeded", attempt: 1, version: 2, lease: leaseNone, result: `{"refund":"re_1"}`,
			entries: []wantEntry{{"key_reused", "agent", 0}}}},
	{name: "intent with other params on retry_requested is key_reused and starts nothing", setup: toRetryRequested,
		entry: intent(IntentOpts{Tool: "payments.charge"}),
		want: entryWant{outcome: "rejected", code: "key_reused", status: "retry_requested", attempt: 1, version: 3, lease: leaseKept,
			entries: []wantEntry{{"key_reused", "agent", 0}}}},
	{name: "outcome for an attempt that has not started is invalid_transition", setup: toInProgress, entry: succeeded2,
		want: entryWant{outcome: "rejected", code: "invalid_transition", status: "in_progress", attempt: 1, version: 1, lease: leaseKept,
			entries: []wantEntry{{"rejected", "agent", 2}}}},
	{name: "heartbeat for an attempt that has not started is invalid_transition", setup: toInProgress,
		entry: `{"key":"k","type":"heartbeat","attempt":3}`,
		want: entryWant{outcome: "rejected", code: "invalid_transition", status: "in_progress", attempt: 1, version: 1, lease: leaseKept,
			entries: []wantEntry{{"rejected", "agent", 3}}}},

	// Late results.
	{name: "late succeeded before the sweeper ran", setup: toLeasePassed, entry: succeeded1,
		want: entryWant{outcome: "recorded", status: "succeeded", attempt: 1, version: 2, lease: leaseNone, result: `{"refund":"re_1"}`,
			entries: []wantEntry{{"late_result", "agent", 1}}}},
	{name: "late failed before the sweeper ran", setup: toLeasePassed, entry: failed1,
		want: entryWant{outcome: "recorded", status: "failed", attempt: 1, version: 2, lease: leaseNone,
			entries: []wantEntry{{"late_result", "agent", 1}}}},
	{name: "late succeeded resolves timed_out", setup: toTimedOut, entry: succeeded1,
		want: entryWant{outcome: "recorded", status: "succeeded", attempt: 1, version: 3, lease: leaseNone, result: `{"refund":"re_1"}`,
			entries: []wantEntry{{"late_result", "agent", 1}}}},
	{name: "late failed resolves timed_out", setup: toTimedOut, entry: failed1,
		want: entryWant{outcome: "recorded", status: "failed", attempt: 1, version: 3, lease: leaseNone,
			entries: []wantEntry{{"late_result", "agent", 1}}}},
	{name: "late succeeded on retry_requested cancels the retry", setup: toRetryRequested, entry: succeeded1,
		want: entryWant{outcome: "recorded", status: "succeeded", attempt: 1, version: 4, lease: leaseNone, result: `{"refund":"re_1"}`,
			entries: []wantEntry{{"late_result", "agent", 1}}}},
	{name: "late failed on retry_requested leaves the retry in place", setup: toRetryRequested, entry: failed1,
		want: entryWant{outcome: "recorded", status: "retry_requested", attempt: 1, version: 3, lease: leaseKept,
			entries: []wantEntry{{"late_result", "agent", 1}}}},
	{name: "late succeeded on retry_requested after the retry started is stale", setup: then(toRetryRequested, send(intentK)), entry: succeeded1,
		want: entryWant{outcome: "rejected", code: "stale_attempt", status: "in_progress", attempt: 2, version: 4, lease: leaseKept,
			entries: []wantEntry{{"stale_outcome", "agent", 1}}}},

	// Duplicates.
	{name: "succeeded sent again is a duplicate", setup: toSucceeded, entry: succeeded1,
		want: entryWant{outcome: "duplicate", status: "succeeded", attempt: 1, version: 2, lease: leaseNone, result: `{"refund":"re_1"}`}},
	{name: "failed sent again is a duplicate", setup: toFailed, entry: failed1,
		want: entryWant{outcome: "duplicate", status: "failed", attempt: 1, version: 2, lease: leaseNone}},
	{name: "retriable failed sent again is a duplicate", setup: toFailedRetriable, entry: failedRetriable1,
		want: entryWant{outcome: "duplicate", status: "failed", attempt: 1, version: 2, lease: leaseNone}},
	{name: "late succeeded sent again is a duplicate", setup: toSucceededLate, entry: succeeded1,
		want: entryWant{outcome: "duplicate", status: "succeeded", attempt: 1, version: 3, lease: leaseNone, result: `{"refund":"re_1"}`}},
	{name: "compensated sent again is a duplicate", setup: toCompensated, entry: compensated1,
		want: entryWant{outcome: "duplicate", status: "compensated", attempt: 1, version: 4, lease: leaseNone, result: `{"refund":"re_1"}`}},
	{name: "succeeded resent after an operator decided compensate is a duplicate", setup: toCompensateLater, entry: succeeded1,
		want: entryWant{outcome: "duplicate", status: "compensation_requested", attempt: 1, version: 3, lease: leaseNone, result: `{"refund":"re_1"}`}},
	{name: "succeeded resent after compensation finished is a duplicate", setup: toCompensated, entry: succeeded1,
		want: entryWant{outcome: "duplicate", status: "compensated", attempt: 1, version: 4, lease: leaseNone, result: `{"refund":"re_1"}`}},
	{name: "late failed resent on retry_requested is a duplicate", setup: toRetryThenLateFail, entry: failed1,
		want: entryWant{outcome: "duplicate", status: "retry_requested", attempt: 1, version: 3, lease: leaseKept}},
	{name: "failed resent after an operator decided retry is a duplicate", setup: toRetryAfterFailure, entry: failed1,
		want: entryWant{outcome: "duplicate", status: "retry_requested", attempt: 1, version: 3, lease: leaseNone}},

	// Outcomes the state does not allow.
	{name: "failed after confirm is invalid_transition", setup: toConfirmed, entry: failed1,
		want: entryWant{outcome: "rejected", code: "invalid_transition", status: "confirmed", attempt: 1, version: 3, lease: leaseKept, result: `{"refund":"re_9"}`,
			entries: []wantEntry{{"rejected", "agent", 1}}}},
	{name: "succeeded after confirm is invalid_transition", setup: toConfirmed, entry: succeeded1,
		want: entryWant{outcome: "rejected", code: "invalid_transition", status: "confirmed", attempt: 1, version: 3, lease: leaseKept, result: `{"refund":"re_9"}`,
			entries: []wantEntry{{"rejected", "agent", 1}}}},
	{name: "succeeded after abandon is invalid_transition", setup: toAbandoned, entry: succeeded1,
		want: entryWant{outcome: "rejected", code: "invalid_transition", status: "abandoned", attempt: 1, version: 3, lease: leaseKept,
			entries: []wantEntry{{"rejected", "agent", 1}}}},
	{name: "failed after compensate was decided is invalid_transition", setup: toCompRequested, entry: failed1,
		want: entryWant{outcome: "rejected", code: "invalid_transition", status: "compensation_requested", attempt: 1, version: 3, lease: leaseNone, result: `{"refund":"re_1"}`,
			entries: []wantEntry{{"rejected", "agent", 1}}}},
	{name: "succeeded after failed is invalid_transition", setup: toFailed, entry: succeeded1,
		want: entryWant{outcome: "rejected", code: "invalid_transition", status: "failed", attempt: 1, version: 2, lease: leaseNone,
			entries: []wantEntry{{"rejected", "agent", 1}}}},
	{name: "failed after succeeded is invalid_transition", setup: toSucceeded, entry: failed1,
		want: entryWant{outcome: "rejected", code: "invalid_transition", status: "succeeded", attempt: 1, version: 2, lease: leaseNone, result: `{"refund":"re_1"}`,
			entries: []wantEntry{{"rejected", "agent", 1}}}},
	{name: "compensated while in progress is invalid_transition", setup: toInProgress, entry: compensated1,
		want: entryWant{outcome: "rejected", code: "invalid_transition", status: "in_progress", attempt: 1, version: 1, lease: leaseKept,
			entries: []wantEntry{{"rejected", "agent", 1}}}},
	{name: "compensated after the operator marked it compensated is invalid_transition", setup: toMarkedCompensated, entry: compensated1,
		want: entryWant{outcome: "rejected", code: "invalid_transition", status: "compensated", attempt: 1, version: 4, lease: leaseNone, result: `{"refund":"re_1"}`,
			entries: []wantEntry{{"rejected", "agent", 1}}}},
}

func TestEntryTransitions(t *testing.T) {
	t.Parallel()
	runEntryCases(t, entryCases)
}

// runEntryCases runs cases on each database.
func runEntryCases(t *testing.T, cases []entryCase) {
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		// Cases run one after another on one database, each in its own
		// namespace and a day after the previous one, so one case's
		// sweep never reaches a lease another case still needs.
		c := newClock()
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				if tc.skip != "" {
					t.Skip(tc.skip)
				}
				c.Advance(24 * time.Hour)
				f := newFixture(t, st, FixtureOpts{Clock: c})
				for _, o := range tc.setup {
					o(t, f)
				}
				var before *record.Action
				if tc.setup != nil {
					before = f.action(t, "k")
				}
				countBefore := countEntries(t, st, "", "")

				res := submit(t, f.l, f.agent, tc.entry)

				w := tc.want
				now := c.Now()
				require.Equal(t, w.outcome, res.Outcome, "outcome (error %+v)", res.Error)
				require.Equal(t, "k", res.Key)
				if w.code == "" {
					require.Nil(t, res.Error)
				} else {
					require.NotNil(t, res.Error)
					require.Equal(t, w.code, res.Error.Code, res.Error.Message)
					require.NotEmpty(t, res.Error.Message)
				}
				if w.status == "" {
					require.Nil(t, res.Action)
					require.Nil(t, res.Attempt)
					_, err := f.l.ActionByKey(context.Background(), f.agent, "", "k")
					require.ErrorIs(t, err, services.ErrNotFound)
					require.Equal(t, countBefore, countEntries(t, st, "", ""), "nothing may be written")
					return
				}
				stored := f.action(t, "k")
				for _, a := range []*record.Action{res.Action, stored} {
					require.NotNil(t, a)
					require.Equal(t, w.status, a.Status)
					require.Equal(t, w.attempt, a.Attempt)
					require.Equal(t, w.version, a.Version)
					switch {
					case w.lease == leaseNone:
						require.Nil(t, a.LeaseUntil)
					case w.lease == leaseKept:
						require.Equal(t, before.LeaseUntil == nil, a.LeaseUntil == nil, "lease kept")
						if before.LeaseUntil != nil {
							require.True(t, before.LeaseUntil.Equal(*a.LeaseUntil), "lease kept: %s, was %s", a.LeaseUntil, before.LeaseUntil)
						}
					default:
						require.NotNil(t, a.LeaseUntil)
						require.True(t, now.Add(w.lease).Equal(*a.LeaseUntil), "lease %s, want now+%s", a.LeaseUntil, w.lease)
					}
					if w.result == "" {
						require.Nil(t, a.Result)
					} else {
						require.JSONEq(t, w.result, string(a.Result))
					}
				}
				require.NotNil(t, res.Attempt)
				require.Equal(t, w.attempt, *res.Attempt)
				if w.answerLease == 0 {
					require.Equal(t, res.Action.LeaseUntil, res.LeaseUntil)
				} else {
					require.NotNil(t, res.LeaseUntil, "the lease answered")
					require.True(t, now.Add(w.answerLease).Equal(*res.LeaseUntil), "lease answered %s, want now+%s", res.LeaseUntil, w.answerLease)
				}
				if w.check != nil {
					w.check(t, stored)
				}
				if before != nil {
					require.Equal(t, before.ID, stored.ID)
				}
				all := f.entries(t, stored.ID)
				appended := countEntries(t, st, "", "") - countBefore
				require.Equal(t, len(w.entries), appended, "entries appended: %s", describeEntries(all))
				requireEntries(t, w.entries, all[len(all)-appended:], now)
				if appended > 0 { // the entry answered is the first appended: the agent's own
					require.NotNil(t, res.Entry)
					require.Equal(t, all[len(all)-appended].Seq, res.Entry.Seq)
					require.Equal(t, all[len(all)-appended].ID, res.Entry.ID)
				} else {
					require.Nil(t, res.Entry)
				}
				for i, e := range all {
					require.Equal(t, i+1, e.Seq, "timeline sequence")
				}
			})
		}
	})
}

// TestEntryRecordsWhatTheAgentSaid checks the data an entry carries onto the
// action and into the timeline.
func TestEntryRecordsWhatTheAgentSaid(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		f := newFixture(t, st, FixtureOpts{})
		occurred := "2026-11-30T09:59:58+01:00"
		res := submit(t, f.l, f.agent, `{"key":"refund:order-8812","type":"intent","tool":"payments.refund","effect":"idempotent",
			"params":{"order":"8812","amount":10},"reference":"order 8812","agent":"refunder-7","run_id":"run-1","occurred_at":"`+occurred+`"}`)
		require.Equal(t, record.OutcomeProceed, res.Outcome)
		a := res.Action
		require.Equal(t, f.ns, a.Namespace)
		require.Equal(t, "refund:order-8812", a.Key)
		require.Equal(t, "payments.refund", a.Tool)
		require.Equal(t, record.EffectIdempotent, a.Effect)
		require.Equal(t, "order 8812", *a.Reference)
		require.Equal(t, "refunder-7", *a.Agent)
		require.JSONEq(t, `{"amount":10,"order":"8812"}`, string(a.Params))
		require.True(t, f.clock.Now().Add(services.DefaultTimeout).Equal(*a.LeaseUntil), "default lease is 300 s")
		require.True(t, a.CreatedAt.Equal(f.clock.Now()))
		require.True(t, a.UpdatedAt.Equal(f.clock.Now()))
		stored := f.action(t, "refund:order-8812")
		require.Equal(t, a.ID, stored.ID)
		require.JSONEq(t, string(a.Params), string(stored.Params))

		es := f.entries(t, a.ID)
		require.Len(t, es, 1)
		require.Equal(t, record.Actor{Kind: "agent", Name: "refunder-7"}, es[0].Actor)
		want, _ := time.Parse(time.RFC3339, occurred)
		require.True(t, want.Equal(*es[0].OccurredAt), "client clock kept: %s", es[0].OccurredAt)
		require.Equal(t, time.UTC, es[0].OccurredAt.Location())

		f.clock.Advance(time.Second)
		res = submit(t, f.l, f.agent, `{"key":"refund:order-8812","type":"failed","attempt":1,"error":"psp down","retriable":true}`)
		require.Equal(t, record.OutcomeRecorded, res.Outcome)
		es = f.entries(t, a.ID)
		require.Equal(t, record.Actor{Kind: "agent", Name: "refund-bot"}, es[1].Actor, "agent defaults to the key's name")
		var p map[string]any
		require.NoError(t, json.Unmarshal(es[1].Payload, &p))
		require.Equal(t, "psp down", p["error"])
		require.Equal(t, true, p["retriable"])
		require.True(t, res.Action.UpdatedAt.Equal(f.clock.Now()))
		require.True(t, res.Action.CreatedAt.Equal(t0))
	})
}

// TestActionAgentDefaultsToKeyName: SPEC's entry table ("Agent wire
// contract") makes "agent" default to the API key's name, on the action as
// on the entry.
func TestActionAgentDefaultsToKeyName(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		f := newFixture(t, st, FixtureOpts{})
		res := submit(t, f.l, f.agent, intentK)
		require.Equal(t, record.OutcomeProceed, res.Outcome)
		require.NotNil(t, res.Action.Agent)
		require.Equal(t, "refund-bot", *res.Action.Agent)
		require.Equal(t, "refund-bot", *f.action(t, "k").Agent)
		page, err := f.l.List(context.Background(), f.agent, services.ActionFilter{Agent: "refund-bot"})
		require.NoError(t, err)
		require.Len(t, page.Actions, 1)
	})
}

// TestFingerprint checks that the same params spelled differently are the
// same action and that anything else under the key is key_reused.
func TestFingerprint(t *testing.T) {
	t.Parallel()
	const stored = `{"order":"8812","amount":10,"lines":[{"sku":"a","qty":1}],"note":null}`
	cases := []struct {
		name    string
		tool    string
		effect  record.Effect
		params  string
		outcome record.Outcome
		code    string
	}{
		{"identical", "", "", stored, "in_progress", ""},
		{"keys reordered", "", "", `{"note":null,"lines":[{"qty":1,"sku":"a"}],"amount":10,"order":"8812"}`, "in_progress", ""},
		{"whitespace", "", "", "{ \"order\" : \"8812\",\n\t\"amount\": 10, \"lines\": [ {\"sku\":\"a\", \"qty\":1} ], \"note\": null }", "in_progress", ""},
		{"1.0 for 1", "", "", `{"order":"8812","amount":10.0,"lines":[{"sku":"a","qty":1.0}],"note":null}`, "in_progress", ""},
		{"exponent for 10", "", "", `{"order":"8812","amount":1e1,"lines":[{"sku":"a","qty":1E0}],"note":null}`, "in_progress", ""},
		{"escaped characters", "", "", `{"order":"\u0038812","amount":10,"lines":[{"sku":"\u0061","qty":1}],"note":null}`, "in_progress", ""},
		{"another effect class", "", "unkeyed", stored, "in_progress", ""},
		{"different amount", "", "", `{"order":"8812","amount":11,"lines":[{"sku":"a","qty":1}],"note":null}`, "rejected", "key_reused"},
		{"number as string", "", "", `{"order":"8812","amount":"10","lines":[{"sku":"a","qty":1}],"note":null}`, "rejected", "key_reused"},
		{"extra field", "", "", `{"order":"8812","amount":10,"lines":[{"sku":"a","qty":1}],"note":null,"x":1}`, "rejected", "key_reused"},
		{"null field left out", "", "", `{"order":"8812","amount":10,"lines":[{"sku":"a","qty":1}]}`, "rejected", "key_reused"},
		{"array reordered", "", "", `{"order":"8812","amount":10,"lines":[{"qty":1,"sku":"a"},{"sku":"b"}],"note":null}`, "rejected", "key_reused"},
		{"no params", "", "", "-", "rejected", "key_reused"},
		{"other tool", "payments.charge", "", stored, "rejected", "key_reused"},
	}
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		f := newFixture(t, st, FixtureOpts{})
		first := submit(t, f.l, f.agent, intent(IntentOpts{Params: stored}))
		require.Equal(t, record.OutcomeProceed, first.Outcome)
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				before := f.action(t, "k")
				n := len(f.entries(t, before.ID))
				res := submit(t, f.l, f.agent, intent(IntentOpts{Tool: tc.tool, Effect: tc.effect, Params: tc.params}))
				require.Equal(t, tc.outcome, res.Outcome)
				require.JSONEq(t, actionJSON(t, before), actionJSON(t, f.action(t, "k")), "the stored action is untouched")
				require.JSONEq(t, actionJSON(t, before), actionJSON(t, res.Action))
				es := f.entries(t, before.ID)
				if tc.code == "" {
					require.Nil(t, res.Error)
					require.Len(t, es, n)
					return
				}
				require.Equal(t, tc.code, res.Error.Code)
				require.Contains(t, res.Error.Message, `"k"`)
				require.Len(t, es, n+1)
				e := es[n]
				requireEntries(t, []wantEntry{{"key_reused", "agent", 0}}, es[n:], f.clock.Now())
				var p struct {
					Tool   string          `json:"tool"`
					Params json.RawMessage `json:"params"`
				}
				require.NoError(t, json.Unmarshal(e.Payload, &p))
				wantTool, wantParams := tc.tool, tc.params
				if wantTool == "" {
					wantTool = "payments.refund"
				}
				if wantParams == "-" {
					wantParams = "{}"
				}
				require.Equal(t, wantTool, p.Tool, "the offending tool is recorded")
				require.JSONEq(t, wantParams, string(p.Params), "the offered params are recorded")
			})
		}
	})
}

// TestNamespaceIsolation checks that a namespace never reaches another's
// actions and that keys are unique per namespace only.
func TestNamespaceIsolation(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		ctx := context.Background()
		c := newClock()
		a := newFixture(t, st, FixtureOpts{Clock: c})
		l := a.l
		b := newFixture(t, st, FixtureOpts{Clock: c, Ledger: l})
		reader := principal(t, st, PrincipalOpts{Namespace: a.ns, Role: services.RoleReader})

		ra := submit(t, l, a.agent, intentK)
		rb := submit(t, l, b.agent, intent(IntentOpts{Params: `{"other":"params"}`}))
		require.Equal(t, record.OutcomeProceed, ra.Outcome)
		require.Equal(t, record.OutcomeProceed, rb.Outcome, "the same key in another namespace is another action")
		require.NotEqual(t, ra.Action.ID, rb.Action.ID)
		require.Equal(t, 1, *rb.Attempt)
		require.Equal(t, a.ns, ra.Action.Namespace)
		require.Equal(t, b.ns, rb.Action.Namespace)

		// Outcomes land on the caller's own action only.
		require.Equal(t, record.OutcomeRecorded, submit(t, l, b.agent, succeeded1).Outcome)
		require.Equal(t, record.StatusInProgress, a.action(t, "k").Status)
		require.Equal(t, record.StatusSucceeded, b.action(t, "k").Status)

		foreign := rb.Action.ID
		for _, p := range []services.Principal{a.agent, a.operator, reader} {
			_, err := l.Action(ctx, p, foreign)
			require.ErrorIs(t, err, services.ErrNotFound, "%s reads a foreign action", p.Role)
			_, err = l.Entries(ctx, p, foreign)
			require.ErrorIs(t, err, services.ErrNotFound, "%s reads a foreign timeline", p.Role)
			_, err = l.ActionByKey(ctx, p, b.ns, "k")
			require.ErrorIs(t, err, services.ErrNotFound, "%s looks up a foreign key", p.Role)
			page, err := l.List(ctx, p, services.ActionFilter{Namespace: b.ns})
			require.NoError(t, err)
			require.Empty(t, page.Actions)
			page, err = l.List(ctx, p, services.ActionFilter{})
			require.NoError(t, err)
			require.Len(t, page.Actions, 1)
			require.Equal(t, ra.Action.ID, page.Actions[0].ID)
		}
		_, _, err := l.Decide(ctx, a.operator, foreign, services.DecisionInput{Decision: "compensate", Reason: "not mine"})
		require.ErrorIs(t, err, services.ErrNotFound)
		require.Equal(t, 2, b.action(t, "k").Version, "nothing written")

		// Unknown and malformed ids are not_found too.
		for _, id := range []string{"0190f3a4-0000-7000-8000-000000000000", "not-a-uuid", ""} {
			_, err := l.Action(ctx, a.agent, id)
			require.ErrorIs(t, err, services.ErrNotFound, "id %q", id)
		}

		// An admin sees both.
		admin := principal(t, st, PrincipalOpts{Role: services.RoleAdmin, Name: "root"})
		got, err := l.Action(ctx, admin, foreign)
		require.NoError(t, err)
		require.Equal(t, b.ns, got.Namespace)
	})
}

// TestSubmitBatch checks that entries of one request are applied in order
// and a rejected one does not affect the others.
func TestSubmitBatch(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		f := newFixture(t, st, FixtureOpts{})
		res := submitAll(t, f.l, f.agent,
			intentK,
			`{"key":"k","type":"heartbeat","attempt":1,"bogus":true}`,
			`not json`,
			heartbeat1,
			succeeded2,
			succeeded1,
			intentK,
		)
		got := make([]string, len(res))
		for i, r := range res {
			got[i] = string(r.Outcome)
			if r.Error != nil {
				got[i] += "/" + r.Error.Code
			}
		}
		require.Equal(t, []string{"proceed", "rejected/invalid", "rejected/invalid_json", "recorded",
			"rejected/invalid_transition", "recorded", "replay"}, got)
		require.Equal(t, 3, f.action(t, "k").Version, "intent, heartbeat and succeeded bump the version, a rejected entry does not")
		es := f.entries(t, res[0].Action.ID)
		require.Equal(t, []record.EntryType{"intent", "heartbeat", "rejected", "succeeded"}, entryTypes(es))

		// Only agents write.
		for _, role := range []services.Role{services.RoleReader, services.RoleOperator} {
			p := principal(t, st, PrincipalOpts{Namespace: f.ns, Role: role})
			_, err := f.l.Submit(context.Background(), p, [][]byte{[]byte(noteK)})
			require.ErrorIs(t, err, services.ErrForbidden, "%s writes", role)
		}
		require.Len(t, f.entries(t, res[0].Action.ID), 4)
	})
}

func entryTypes(es []*record.Entry) []record.EntryType {
	out := make([]record.EntryType, len(es))
	for i, e := range es {
		out[i] = e.Type
	}
	return out
}

func actionJSON(t *testing.T, a *record.Action) string {
	t.Helper()
	b, err := json.Marshal(a)
	require.NoError(t, err)
	return string(b)
}
