// Package driver is the storage seam: the operations Arbiter's services need
// from a database, as one interface with params structs, implemented once
// per database by packages that each write their own SQL natively
// (pgdriver for PostgreSQL, sqlitedriver for SQLite) and are held to the
// same behaviour by one shared suite (drivertest). Business rules call these
// operations and never ask which database is behind them.
//
// Writes of the ledger come in sets (ActionInsertMany, ActionUpdateMany): a
// single change is a set of one, and a driver may write a set of one its
// own faster way. Every change is written with its entry and its alerts in
// one statement or transaction, conditional on the version that was read.
//
// Each driver also owns what else is its database's: what its errors mean
// to the services (ClassifyError, dberror.go) and the lock its migrations
// take (Migrator).
package driver

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"io/fs"
	"slices"
	"time"

	"github.com/pressly/goose/v3/lock"
	"gorm.io/gorm"

	"github.com/arbiter-ledger/arbiter/services/record"
)

// ErrNotFound is returned by reads of one row that find none.
var ErrNotFound = errors.New("driver: not found")

// ErrKeptStale means a group that LimitUseKept answered had changed by the
// time its charges were written: nothing was written.
var ErrKeptStale = errors.New("driver: a limit group changed since it was kept")

// Driver is one database behind Arbiter.
type Driver interface {
	// Name names the database: "postgres" or "sqlite".
	Name() string
	// Where is the database's location without credentials, for logs.
	Where() string
	// Executor runs each operation on its own: every write is atomic by
	// itself.
	Executor() Executor
	// Begin starts a write transaction; its operations see its own writes.
	Begin(ctx context.Context) (Tx, error)
	// Gorm serves configuration records (users, sessions, keys, endpoints):
	// Gorm reads and GormWriter writes (the same handle where the database
	// has no single writer).
	Gorm() *gorm.DB
	GormWriter() *gorm.DB
	// Migrations are this database's migration files, and Migrator the
	// goose settings that apply them, its lock included.
	Migrations() fs.FS
	Migrator() (Migrator, error)
	// ClassifyError says what an error of this database means to the
	// services: a failure of the database itself, a deadlock, or another
	// failure (ErrorOther for nil).
	ClassifyError(err error) ErrorKind
	// Concurrency says how the ledger should group concurrent writers.
	Concurrency() Concurrency
	// Embedded reports whether the database lives in the process's own
	// files, so that `serve` migrates it without being told to.
	Embedded() bool
	// Logger keeps the evidence log beside the entries.
	Logger
	// Seed fills the database with synthetic actions in bulk, for
	// benchmarks and query-plan tests.
	Seed(ctx context.Context, p *SeedParams) (string, error)
	Ping(ctx context.Context) error
	Close() error
}

// Migrator is what goose needs to apply Migrations.
type Migrator struct {
	// GooseDialect is goose's name for the database.
	GooseDialect string
	// DB is the connection migrations run on.
	DB *sql.DB
	// Lock, when set, makes concurrent migrators take turns; nil where the
	// database needs none.
	Lock lock.SessionLocker
}

// Concurrency describes how writes of one database may overlap.
type Concurrency struct {
	// SingleWriter means one write transaction at a time: every entry of
	// a request joins the writer's next shared transaction.
	SingleWriter bool
	// Flushers is how many group writes may be in flight at once.
	Flushers int
}

// Tx is an Executor inside one write transaction.
type Tx interface {
	Executor
	Commit() error
	Rollback() error
}

// Executor is every operation of the ledger, the sweeper, the triage queue
// and the webhook dispatcher.
type Executor interface {
	// ActionGetByID reads one action, or ErrNotFound.
	ActionGetByID(ctx context.Context, id string) (*record.Action, error)
	// ActionGetByKey reads the action for (namespace, key), or ErrNotFound.
	ActionGetByKey(ctx context.Context, namespace, key string) (*record.Action, error)
	// ActionList reads actions newest first (by id, which is UUIDv7).
	ActionList(ctx context.Context, p *ActionListParams) ([]*record.Action, error)
	// ActionInsertMany creates actions with their first entries and alerts
	// (changes with Prev nil). It reports which were written: a key that
	// exists already, or the second change for one key, is not, and its
	// change is decided again on the stored action. Written changes get
	// Entry.Seq and Next.EntrySeq set.
	ActionInsertMany(ctx context.Context, chs []*Change) ([]bool, error)
	// ActionUpdateMany writes changes to distinct existing actions, each
	// only if its action still has the version read (Prev.Version): one
	// that lost that race writes nothing. It reports which were written;
	// those get Entry.Seq and Next.EntrySeq set.
	ActionUpdateMany(ctx context.Context, chs []*Change) ([]bool, error)
	// ActionDueList reads actions whose deadline passed by Now, in
	// deadline order (then id), after After when it is set.
	ActionDueList(ctx context.Context, p *ActionDueListParams) ([]*record.Action, error)
	// ActionLeftStatus reads which of ids name an action no longer in
	// status, or no action at all: one set query for many waiters.
	ActionLeftStatus(ctx context.Context, ids []string, status record.Status) ([]string, error)
	// ActionCountByStatus counts actions per status, every namespace.
	ActionCountByStatus(ctx context.Context) (map[record.Status]int64, error)
	// ActionPrune deletes at most Limit actions (and their entries) in one
	// of Statuses last changed before Before, and says how many.
	ActionPrune(ctx context.Context, p *PruneParams) (int64, error)

	// EntryList reads a part of an action's timeline (all of it with the
	// zero bounds), oldest first or newest first. With MaxBytes set,
	// reading stops after the entry that brings EntryBytes to it.
	EntryList(ctx context.Context, p *EntryListParams) ([]*record.Entry, error)
	// EntryOutcomeExists reports whether an outcome of the type for the
	// attempt is in the timeline already, recorded as itself or as a late
	// result.
	EntryOutcomeExists(ctx context.Context, p *EntryOutcomeExistsParams) (bool, error)
	// EntryCountByType counts entries of one type, every namespace.
	EntryCountByType(ctx context.Context, typ record.EntryType) (int, error)

	// TriageCounts counts actions per status of Statuses.
	TriageCounts(ctx context.Context, p *TriageParams) (map[record.Status]int64, error)
	// TriageWaiting reads actions in one of Statuses, least recently
	// changed first.
	TriageWaiting(ctx context.Context, p *TriageParams) ([]*record.Action, error)
	// TriageAlertCounts counts entries per type of AlertTypes recorded
	// since Since.
	TriageAlertCounts(ctx context.Context, p *TriageParams) (map[record.EntryType]int64, error)
	// TriageAlerts reads entries of AlertTypes recorded since Since, oldest
	// first, with their actions.
	TriageAlerts(ctx context.Context, p *TriageParams) ([]*TriageAlert, error)
	// TriageStamp summarizes the whole queue (every namespace): the
	// number and newest change of waiting actions and of alerts.
	TriageStamp(ctx context.Context, p *TriageParams) (string, error)
	// ReviewPending lists which of ids have an alert of AlertTypes
	// recorded since Since that no acknowledge decision cleared yet.
	ReviewPending(ctx context.Context, ids []string, p *TriageParams) ([]string, error)

	// LimitUse reads the counted use of each (limit, group) of ps, for a
	// first intent about to be charged to them. On PostgreSQL each group's
	// lock is taken first, in the order given (the ledger sorts), and held
	// until the transaction ends, so two charges of one group are decided
	// one after the other and groups do not wait for each other; SQLite's
	// single writer decides one at a time already. Call it in a
	// transaction.
	LimitUse(ctx context.Context, ps []LimitUseParams) ([]float64, error)
	// LimitUseKept answers what LimitUse would, without a lock and without
	// the database, from each group's row as this process last read or
	// wrote it, when it has them all (PostgreSQL). Charges judged on it are
	// written outside a transaction, by ActionInsertMany on this executor,
	// and only if every group's row is still the one answered and nothing
	// of it left the window unseen: otherwise nothing is written and it
	// fails with ErrKeptStale. ok is false when it cannot answer; then
	// call LimitUse in a transaction.
	LimitUseKept(ps []LimitUseParams) (used []float64, ok bool)
	// LimitFlipsApply keeps the groups' use right after actions changed
	// status (MayFlip): each charge of theirs that starts or stops
	// counting, and is still inside what its group keeps, adds or takes
	// its amount, under the groups' locks. Call it in the transaction
	// that changed them.
	LimitFlipsApply(ctx context.Context, fs []LimitFlip) error
	// LimitUsage reads the groups of a limit with the most counted use at
	// Now, at most Limit of them, or only Group when it is set.
	LimitUsage(ctx context.Context, p *LimitUsageParams) ([]*LimitGroupUse, error)
	// LimitGroupCharges reads one group's charges younger than Since with
	// their actions, newest first, at most Limit of them: the actions
	// behind its use, counting or not.
	LimitGroupCharges(ctx context.Context, p *LimitUsageParams) ([]*LimitGroupCharge, error)

	// BreakerCounts counts, per tool, the actions of a namespace whose
	// first intent came at or after Since and that have an outcome or lost
	// it: every status but those that never ran (awaiting_approval,
	// approved, denied) and in_progress within its lease at Now. Unknown
	// are those that timed out (by lease or outcome_unknown, resolved
	// since or not, or in_progress past their lease), Failed those failed.
	BreakerCounts(ctx context.Context, p *BreakerCountParams) ([]*ToolOutcomes, error)

	// DeliveryClaim leases due deliveries for a dispatcher.
	DeliveryClaim(ctx context.Context, p *DeliveryClaimParams) ([]*ClaimedDelivery, error)
	// DeliveryRecordAttempt keeps one attempt, moves its delivery on and
	// updates its endpoint's failure streak, in one statement or
	// transaction.
	DeliveryRecordAttempt(ctx context.Context, p *DeliveryRecordAttemptParams) error
	// DeliveryRecordAttempts records many attempts, in the order given, in
	// one statement or transaction: the same effects as recording each in
	// turn.
	DeliveryRecordAttempts(ctx context.Context, ps []*DeliveryRecordAttemptParams) error
	// DeliveryQueueStats counts pending deliveries of enabled endpoints and
	// finds the oldest one's creation.
	DeliveryQueueStats(ctx context.Context) (int64, *time.Time, error)
	// MessagePrune deletes at most Limit webhook messages created before
	// Before with no pending delivery, and says how many.
	MessagePrune(ctx context.Context, p *PruneParams) (int64, error)
}

// Change is one state change of an action: the entry to append, the
// action's new state and the alerts it causes.
type Change struct {
	// Prev is the action as read; nil when the change creates it.
	Prev *record.Action
	// Next is the action as it will be stored: for an update, its version
	// is Prev's (an entry only) or one more, and UpdatedAt is the entry's
	// time.
	Next   *record.Action
	Entry  record.Entry
	Alerts []Alert
	// Charges are what a new action's limits charge it, written with it
	// if it is (ActionInsertMany), with what those that count add to
	// their groups' kept use, read under their locks by LimitUse in the
	// same transaction, or answered by LimitUseKept on the same executor.
	Charges []LimitCharge
}

// Alert is a webhook message to write with the change. Its body (Body) is
// the message; the driver fills in data.entry.seq, which the same write
// assigns.
type Alert struct {
	ID   string
	Type record.EventType
	// Payload is the body, or nil until Body builds it with Build. A
	// driver that finds no endpoint to write a message for need not build
	// it at all.
	Payload json.RawMessage
	Build   func() json.RawMessage
}

// Body returns the alert's message body, building it the first time.
func (a *Alert) Body() json.RawMessage {
	if a.Payload == nil && a.Build != nil {
		a.Payload = a.Build()
	}
	return a.Payload
}

// ActionListParams filters a list. Zero fields match everything.
type ActionListParams struct {
	Namespace string
	// Namespaces, when not empty, narrows to these: the namespaces a person
	// is a member of.
	Namespaces []string
	Statuses   []record.Status
	Tool       string
	Agent      string
	Since      *time.Time // created at or after
	Until      *time.Time // created before
	Search     string     // key or reference, exact, or by prefix when it ends in * (SearchPrefix)
	IDs        []string   // only these actions (well-formed ids)
	BeforeID   string     // keyset: ids below this one
	Limit      int
	// MaxBytes, when set, stops reading after the action that brings
	// ActionBytes to it, so a page of large params and results is not held
	// whole: fewer than Limit actions back does not then mean the end.
	MaxBytes int
}

// EntryListParams select a part of one action's timeline. Zero fields
// bound nothing.
type EntryListParams struct {
	ActionID  string
	AfterSeq  int  // entries with a seq above it
	BeforeSeq int  // entries with a seq below it
	Newest    bool // newest first (seq descending) rather than oldest first
	Limit     int
	// MaxBytes, when set, stops reading after the entry that brings
	// EntryBytes to it (see ActionListParams.MaxBytes).
	MaxBytes int
}

// ActionDueListParams selects passed deadlines.
type ActionDueListParams struct {
	Now   time.Time
	After *record.Action // the last action of the previous batch
	Limit int
}

// PruneParams bounds one batch of retention.
type PruneParams struct {
	Statuses []record.Status
	Before   time.Time
	Limit    int
	// After is where a batch of actions starts (updated_at at or after it;
	// zero: the oldest). ActionPrune may set it to the newest updated_at it
	// deleted, for the next batch.
	After time.Time
}

// EntryOutcomeExistsParams names an outcome.
type EntryOutcomeExistsParams struct {
	ActionID string
	Attempt  int
	Type     record.EntryType
}

// TriageParams scopes the triage reads. The statuses and alert types are
// spelled into the SQL as the partial indexes of migration 00003 spell
// them, so the planner can prove the indexes apply; they must be constants
// of package record.
type TriageParams struct {
	Namespace  string   // empty: every namespace
	Namespaces []string // when not empty, only these (a person's memberships)
	Statuses   []record.Status
	AlertTypes []record.EntryType
	Since      time.Time // alerts recorded at or after
	Limit      int
}

// TriageAlert is an alert entry with its action.
type TriageAlert struct {
	Type       record.EntryType
	RecordedAt time.Time
	Action     *record.Action
}

// DeliveryClaimParams says what a dispatcher may take.
type DeliveryClaimParams struct {
	Token       string
	Now         time.Time
	Until       time.Time // the lease
	Limit       int
	PerEndpoint int
	Busy        map[string]int // sends in flight per endpoint
}

// ClaimedDelivery is a leased delivery with what sending it needs.
type ClaimedDelivery struct {
	ID, MessageID, EndpointID, EventType, URL, Format string
	Payload                                           []byte
	Secret                                            string
	PreviousSecret                                    *string
	PreviousSecretUntil                               *time.Time
	Attempts                                          int
	FailingSince                                      *time.Time
}

// EndpointChange is what one attempt does to its endpoint.
type EndpointChange int

const (
	// EndpointSucceeded ends the endpoint's failure streak.
	EndpointSucceeded EndpointChange = iota
	// EndpointFailing starts a failure streak unless one is running.
	EndpointFailing
	// EndpointDisable disables the endpoint with DisabledReason.
	EndpointDisable
)

// DeliveryRecordAttemptParams is one attempt and its consequences.
type DeliveryRecordAttemptParams struct {
	AttemptID   string
	DeliveryID  string
	Claim       string
	Now         time.Time
	StatusCode  *int
	LatencyMS   int
	Excerpt     string
	Error       *string
	State       string
	Attempts    int
	NextAttempt *time.Time // nil keeps next_attempt_at
	EndpointID  string
	Endpoint    EndpointChange
	DisableWhy  string
}

// EndpointNet is what a run of attempts, applied in order, does to one
// endpoint: Reset when one of them succeeded (the failure streak is then
// FailingSince, nil when nothing failed after the last success); otherwise
// a streak starts at FailingSince unless one is running. DisableWhy, when
// not empty, disables the endpoint at DisableAt.
type EndpointNet struct {
	EndpointID   string
	Reset        bool
	FailingSince *time.Time
	DisableWhy   string
	DisableAt    time.Time
}

// EndpointNets folds the endpoint changes of attempts, in their order, into
// one change per endpoint (in the order the endpoints first appear), so that
// a batch can write each endpoint once.
func EndpointNets(ps []*DeliveryRecordAttemptParams) []*EndpointNet {
	var out []*EndpointNet
	by := map[string]*EndpointNet{}
	for _, p := range ps {
		n := by[p.EndpointID]
		if n == nil {
			n = &EndpointNet{EndpointID: p.EndpointID}
			by[p.EndpointID] = n
			out = append(out, n)
		}
		switch p.Endpoint {
		case EndpointSucceeded:
			n.Reset, n.FailingSince = true, nil
		case EndpointDisable:
			n.DisableWhy, n.DisableAt = p.DisableWhy, p.Now
		default:
			if n.FailingSince == nil {
				at := p.Now
				n.FailingSince = &at
			}
		}
	}
	return out
}

// SeedParams describes a synthetic ledger: Actions actions in namespace
// Namespace (finished ones, spread over 20 tools and 50 agents), of which
// TimedOut are timed out, and one more with LongTimeline entries if it is
// above zero. Seed returns that action's id.
type SeedParams struct {
	Namespace string
	// From and Actions: this call writes the actions seed:From to
	// seed:From+Actions-1 (From counts from 1), so a large seed goes in
	// parts; the first TimedOut of all of them are timed out.
	From     int
	Actions  int
	TimedOut int
	// Last is the last part: it writes the long timeline and analyzes.
	Last         bool
	LongTimeline int
	Now          time.Time
}

// BreakerCountParams selects the recent actions of a namespace.
type BreakerCountParams struct {
	Namespace  string
	Since, Now time.Time
}

// ToolOutcomes counts one tool's recent actions that have an outcome or
// lost it.
type ToolOutcomes struct {
	Tool                     string
	Settled, Unknown, Failed int
}

// BreakerUnsettled are the statuses of actions that never ran: a breaker
// does not count them.
var BreakerUnsettled = []record.Status{record.StatusAwaitingApproval, record.StatusApproved, record.StatusDenied}

// LimitUncounted are the statuses whose actions' charges stop counting: the
// action did not happen (denied, failed) or was undone (compensated).
// Every other status counts, an unknown outcome above all: it may have
// happened.
var LimitUncounted = []record.Status{record.StatusDenied, record.StatusFailed, record.StatusCompensated}

// A charge counts toward its group while it is younger than its limit's
// window, its action's status is not in LimitUncounted, and it is not held
// (its action waits for approval because it exceeded this limit: it counts
// once people approve it).

// LimitUseParams names one group of one limit and the start of its window:
// charges at or before Since no longer count.
type LimitUseParams struct {
	LimitID, Group string
	Since          time.Time
	// Window is the limit's window now: a group's kept use is summed
	// again from its charges when the window changed.
	Window time.Duration
	// Lock is the group's lock on PostgreSQL (a hash of the limit and the
	// group; two groups sharing one only wait for each other).
	Lock int64
}

// LimitCharge is one charge as stored.
type LimitCharge struct {
	LimitID, Group, ActionID string
	Amount                   float64
	ChargedAt                time.Time
	Held                     bool
	// Counts says the charge counts as written (its new action's status
	// and Held, ChargeCounts): its group's kept use grows by Amount.
	Counts bool
}

// ChargeCounts is whether a charge inside its window counts while its
// action has status st: not when the action did not happen or was undone
// (LimitUncounted), nor while it waits for people because it exceeded this
// limit (held).
func ChargeCounts(st record.Status, held bool) bool {
	return !slices.Contains(LimitUncounted, st) && !(held && st == record.StatusAwaitingApproval)
}

// LimitFlip is a change of an action's status that may change whether its
// charges count.
type LimitFlip struct {
	ActionID string
	From, To record.Status
}

// MayFlip reports whether a change from one status to another can change
// whether a charge counts.
func MayFlip(from, to record.Status) bool {
	return from != to && (ChargeCounts(from, true) != ChargeCounts(to, true) || ChargeCounts(from, false) != ChargeCounts(to, false))
}

// LimitUsageParams asks for a limit's use at Now over its window.
type LimitUsageParams struct {
	LimitID string
	Since   time.Time
	Group   string // only this group when set
	Limit   int
}

// LimitGroupCharge is one charge of a group with its action.
type LimitGroupCharge struct {
	ActionID, Key, Tool string
	Status              record.Status
	Amount              float64
	ChargedAt           time.Time
	Held                bool
}

// LimitGroupUse is one group's counted use: the sum of its counting charges,
// how many actions they are and when the oldest was charged.
type LimitGroupUse struct {
	Group    string
	Used     float64
	Actions  int
	OldestAt time.Time
}
