package client

import (
	"encoding/json"
	"time"

	"github.com/arbiter-ledger/arbiter/services/record"
)

// Status of an action: the ledger's own type, so the SDK cannot drift from
// the server.
type Status = record.Status

// The statuses, in lifecycle order ([record.Statuses]).
const (
	StatusInProgress            = record.StatusInProgress
	StatusSucceeded             = record.StatusSucceeded
	StatusFailed                = record.StatusFailed
	StatusTimedOut              = record.StatusTimedOut
	StatusRetryRequested        = record.StatusRetryRequested
	StatusConfirmed             = record.StatusConfirmed
	StatusCompensationRequested = record.StatusCompensationRequested
	StatusCompensated           = record.StatusCompensated
	StatusAbandoned             = record.StatusAbandoned
	StatusAwaitingApproval      = record.StatusAwaitingApproval // held for approval: attempt 0, nothing runs
	StatusApproved              = record.StatusApproved         // the next intent gets proceed, attempt 1
	StatusDenied                = record.StatusDenied           // rejected or expired: final
)

// Effect is an effect class, the ledger's own type. The fields of the
// requests and answers stay plain strings, so the Effect* constants below
// are strings spelled by record; convert with Effect(s) to use the type.
type Effect = record.Effect

// Effect classes say how safe a repeat of a tool call is ([record.Effects]).
const (
	EffectReadOnly   = string(record.EffectReadOnly)
	EffectIdempotent = string(record.EffectIdempotent) // state-setting: safe to repeat
	EffectKeyed      = string(record.EffectKeyed)      // the downstream honours the key: a retry with it is safe
	EffectUnkeyed    = string(record.EffectUnkeyed)    // the downstream does not deduplicate (the default)
)

// EntryType says what an entry records: the ledger's own type. Like the
// effects, the Type* constants are strings spelled by record.
type EntryType = record.EntryType

// Entry types an agent sends ([record.AgentEntryTypes]).
const (
	TypeIntent    = string(record.TypeIntent)
	TypeHeartbeat = string(record.TypeHeartbeat)
	TypeSucceeded = string(record.TypeSucceeded)
	TypeFailed    = string(record.TypeFailed)
	// TypeOutcomeUnknown: the agent cannot tell whether the effect
	// happened (a timeout, a connection lost after the request left); the
	// action is timed_out at once and goes to a lookup, then a person.
	TypeOutcomeUnknown = string(record.TypeOutcomeUnknown)
	TypeCompensated    = string(record.TypeCompensated)
	TypeNote           = string(record.TypeNote)
	// Look before you resend: a worker takes a lookup lease on a timed-out
	// attempt, asks its downstream, and reports what it found; a
	// compensation that did not work is reported so its lease is released.
	TypeLookup             = string(record.TypeLookup)
	TypeLookupResult       = string(record.TypeLookupResult)
	TypeCompensationFailed = string(record.TypeCompensationFailed)
)

// Answer is what a lookup found out about an attempt whose outcome was
// unknown. It is the ledger's own type, so it compares with
// Action.Reconciliation.LastLookup.Answer.
type Answer = record.Answer

// The answers of a lookup.
const (
	// AnswerHappened: the downstream has the effect; the action is
	// confirmed with the lookup's external ref and result.
	AnswerHappened = record.AnswerHappened
	// AnswerNotHappened: the downstream provably has no such effect. A
	// keyed, idempotent or read-only action (whose key the downstream still
	// honours) is retried with its key; any other waits for a person.
	AnswerNotHappened = record.AnswerNotHappened
	// AnswerUnknown: the downstream cannot say; a person decides.
	AnswerUnknown = record.AnswerUnknown
)

// MaxLookups is how many lookups the ledger grants one attempt.
const MaxLookups = record.MaxLookups

// Outcomes of an entry ([record.Outcomes]), strings spelled by record
// (Outcome is the guard's outcome of a call).
const (
	OutcomeProceed    = string(record.OutcomeProceed)    // execute now, with the attempt given
	OutcomeReplay     = string(record.OutcomeReplay)     // finished before: do not execute; the action has the saved result
	OutcomeInProgress = string(record.OutcomeInProgress) // another attempt holds a live lease
	OutcomeHeld       = string(record.OutcomeHeld)       // timed out: a person must decide; do not execute
	OutcomeCompensate = string(record.OutcomeCompensate) // undo the effect, then report compensated
	OutcomeRecorded   = string(record.OutcomeRecorded)
	OutcomeDuplicate  = string(record.OutcomeDuplicate) // the same outcome for the same attempt was recorded before
	OutcomeRejected   = string(record.OutcomeRejected)  // see Result.Error
	// OutcomePendingApproval: held until people approve it; do not execute.
	OutcomePendingApproval = string(record.OutcomePendingApproval)
	// OutcomeDenied: its approval was rejected or expired; do not execute.
	OutcomeDenied = string(record.OutcomeDenied)
	// OutcomeFrozen: a freeze holds the tool back; nothing changed, ask
	// again after Retry-After.
	OutcomeFrozen = string(record.OutcomeFrozen)
)

// Decisions an operator can take ([record.Decisions]), strings spelled by
// record ([Decision] is the request that takes one).
const (
	DecisionConfirm         = string(record.DecisionConfirm)
	DecisionRetry           = string(record.DecisionRetry)
	DecisionCompensate      = string(record.DecisionCompensate)
	DecisionMarkCompensated = string(record.DecisionMarkCompensated)
	DecisionAbandon         = string(record.DecisionAbandon)
	DecisionApprove         = string(record.DecisionApprove) // one distinct person's yes; reason optional
	DecisionReject          = string(record.DecisionReject)
	DecisionAcknowledge     = string(record.DecisionAcknowledge)
)

// Action is the authoritative record of one intended side effect,
// identified by (namespace, key).
type Action struct {
	ID          string          `json:"id"`
	Namespace   string          `json:"namespace"`
	Key         string          `json:"key"`
	Tool        string          `json:"tool"`
	Effect      string          `json:"effect"`
	Status      Status          `json:"status"`
	Attempt     int             `json:"attempt"`
	Version     int             `json:"version"`
	LeaseUntil  *time.Time      `json:"lease_until"`
	Reference   *string         `json:"reference"`
	Agent       *string         `json:"agent"`
	Params      json.RawMessage `json:"params"`
	Result      json.RawMessage `json:"result"`
	ExternalRef *string         `json:"external_ref"`
	CreatedAt   time.Time       `json:"created_at"`
	UpdatedAt   time.Time       `json:"updated_at"`
	// Approval is set on actions held for approval before execution.
	Approval *Approval `json:"approval"`
	// Reconciliation is set on actions with a key_ttl, lookups or a
	// compensation underway: the lookups of the current attempt and the
	// last answer, and how the compensation went.
	Reconciliation *record.Reconciliation `json:"reconciliation"`
	// Limits are the charges of the limits its first intent matched; nil
	// when none did.
	Limits []LimitCharge `json:"limits"`
}

// Approval is what an action held for approval needs and has.
type Approval struct {
	Required   int              `json:"required"`
	Approvals  []ApprovalVote   `json:"approvals"`
	ExpiresAt  time.Time        `json:"expires_at"`
	EscalateAt *time.Time       `json:"escalate_at"`
	Policies   []ApprovalPolicy `json:"policies"`
	// Limits are the limits whose max the action would exceed; the people
	// who approve it let it run over them.
	Limits []ApprovalLimit `json:"limits"`
	// FrozenBy are the active freezes that hold the action: it is approved
	// once each is lifted (and its people approved it).
	FrozenBy  []FreezeRef   `json:"frozen_by"`
	Rejection *ApprovalVote `json:"rejection"`
}

// ApprovalVote is one person's yes, or the rejection.
type ApprovalVote struct {
	By     Actor     `json:"by"`
	At     time.Time `json:"at"`
	Reason string    `json:"reason"`
}

// ApprovalPolicy names a policy at the version that caught the action.
type ApprovalPolicy struct {
	ID      string `json:"id"`
	Name    string `json:"name"`
	Version int    `json:"version"`
	// Error is the policy's run-time error when its condition could not
	// be evaluated for the action (it was held to be safe); nil when the
	// condition evaluated.
	Error *string `json:"error,omitempty"`
}

// Actor says who wrote a ledger entry.
type Actor struct {
	Kind string `json:"kind"` // agent, operator or system
	Name string `json:"name"`
	// Via says how an operator decided: "dashboard" or "api_key:<key name>".
	Via string `json:"via,omitempty"`
}

// LedgerEntry is one immutable record of an action's timeline: what an
// agent sent, or what Arbiter recorded (timed_out, decision, key_reused,
// stale_outcome, late_result, lease_lost, …).
type LedgerEntry struct {
	ID         string          `json:"id"`
	Seq        int             `json:"seq"`
	Type       string          `json:"type"`
	Actor      Actor           `json:"actor"`
	Attempt    *int            `json:"attempt"`
	Payload    json.RawMessage `json:"payload"`
	OccurredAt *time.Time      `json:"occurred_at"`
	RecordedAt time.Time       `json:"recorded_at"`
	// LogIndex is the entry's leaf in the evidence log (AuditProof), once
	// it joined it, within 2 s of its commit.
	LogIndex *int64 `json:"log_index,omitempty"`
}

// DecodePayload decodes the entry's payload into the struct of its type,
// shared with the server: *record.IntentPayload for intent,
// *record.ReportPayload for heartbeats, outcomes, notes, compensation
// failures and the entries recorded about them, *record.DecisionPayload,
// *record.TimedOutPayload, *record.KeyReusedPayload,
// *record.LookupPayload, *record.LookupResultPayload,
// *record.ReconciledPayload. Package record imports only the standard
// library.
func (e LedgerEntry) DecodePayload() (any, error) {
	return record.DecodePayload(&record.Entry{Type: record.EntryType(e.Type), Payload: e.Payload})
}

// Ptr returns a pointer to v, for the optional fields of [Entry] and
// [Decision].
func Ptr[T any](v T) *T { return &v }
