// Package record holds the ledger's vocabulary and its records: the typed
// statuses, effect classes, entry types, outcomes, decisions and alert
// events, the action and entry as they are stored and answered, and the
// payload of every entry type. It imports only the standard library, so
// every layer can share it: the ledger's rules, the storage drivers, the
// views and the OpenAPI test. A rename here fails to compile everywhere it
// matters.
package record

// Status is where an action is in its lifecycle.
type Status string

const (
	// StatusNone is the status of a key that has no action yet. It is never
	// stored: it is the row of the rules table that decides a key's first
	// entry.
	StatusNone Status = ""

	StatusInProgress            Status = "in_progress"
	StatusSucceeded             Status = "succeeded"
	StatusFailed                Status = "failed"
	StatusTimedOut              Status = "timed_out"
	StatusRetryRequested        Status = "retry_requested"
	StatusConfirmed             Status = "confirmed"
	StatusCompensationRequested Status = "compensation_requested"
	StatusCompensated           Status = "compensated"
	StatusAbandoned             Status = "abandoned"

	// Approval before execution: a first intent held for people's yes.
	StatusAwaitingApproval Status = "awaiting_approval"
	StatusApproved         Status = "approved"
	StatusDenied           Status = "denied"
)

// Statuses lists every stored status in lifecycle order, those of approval
// last, as SPEC lists them.
var Statuses = []Status{StatusInProgress, StatusSucceeded, StatusFailed, StatusTimedOut,
	StatusRetryRequested, StatusConfirmed, StatusCompensationRequested, StatusCompensated, StatusAbandoned,
	StatusAwaitingApproval, StatusApproved, StatusDenied}

// TerminalStatuses are those no agent or system event moves the action out
// of by itself; retention may prune actions in them.
var TerminalStatuses = []Status{StatusSucceeded, StatusFailed, StatusConfirmed, StatusCompensated, StatusAbandoned,
	StatusDenied}

// Terminal reports whether s is one of TerminalStatuses.
func (s Status) Terminal() bool {
	for _, t := range TerminalStatuses {
		if s == t {
			return true
		}
	}
	return false
}

// Valid reports whether s is a stored status.
func (s Status) Valid() bool {
	for _, x := range Statuses {
		if s == x {
			return true
		}
	}
	return false
}

// Effect is an action's effect class: how safe a repeat is.
type Effect string

const (
	EffectReadOnly   Effect = "read_only"
	EffectIdempotent Effect = "idempotent"
	EffectKeyed      Effect = "keyed"
	EffectUnkeyed    Effect = "unkeyed"
)

// Effects lists every effect class, the cautious default last.
var Effects = []Effect{EffectReadOnly, EffectIdempotent, EffectKeyed, EffectUnkeyed}

// EntryType says what an entry records.
type EntryType string

// Entry types sent by agents.
const (
	TypeIntent    EntryType = "intent"
	TypeHeartbeat EntryType = "heartbeat"
	TypeSucceeded EntryType = "succeeded"
	TypeFailed    EntryType = "failed"
	// TypeOutcomeUnknown: the agent cannot tell whether the effect happened
	// (a timeout, a connection cut after the request left); the action is
	// timed out at once.
	TypeOutcomeUnknown EntryType = "outcome_unknown"
	TypeCompensated    EntryType = "compensated"
	TypeNote           EntryType = "note"
	// Look before you resend: a lookup lease on a timed-out attempt, its
	// answer, and a compensation that failed.
	TypeLookup             EntryType = "lookup"
	TypeLookupResult       EntryType = "lookup_result"
	TypeCompensationFailed EntryType = "compensation_failed"
)

// AgentEntryTypes are the types an agent may send, in the order of the wire
// contract.
var AgentEntryTypes = []EntryType{TypeIntent, TypeHeartbeat, TypeSucceeded, TypeFailed, TypeOutcomeUnknown,
	TypeCompensated, TypeNote,
	TypeLookup, TypeLookupResult, TypeCompensationFailed}

// Entry types recorded by Arbiter.
const (
	TypeTimedOut       EntryType = "timed_out"
	TypeDecision       EntryType = "decision"
	TypeKeyReused      EntryType = "key_reused"
	TypeStaleOutcome   EntryType = "stale_outcome"
	TypeStaleHeartbeat EntryType = "stale_heartbeat"
	TypeLateResult     EntryType = "late_result"
	TypeLeaseLost      EntryType = "lease_lost"
	TypeRejected       EntryType = "rejected"
	// An approval's deadlines: it expired (the action is denied), or it was
	// escalated (once).
	TypeApprovalExpired   EntryType = "approval_expired"
	TypeApprovalEscalated EntryType = "approval_escalated"
	// Reconciliation: the change a lookup's answer made, and a compensation
	// lease that passed without a report.
	TypeReconciled           EntryType = "reconciled"
	TypeCompensationTimedOut EntryType = "compensation_timed_out"
	// TypeUnfrozen: a freeze that held the action awaiting approval was
	// lifted.
	TypeUnfrozen EntryType = "unfrozen"
)

// EntryTypes lists every entry type, agents' first.
var EntryTypes = append(append([]EntryType{}, AgentEntryTypes...), TypeTimedOut, TypeDecision, TypeKeyReused,
	TypeStaleOutcome, TypeStaleHeartbeat, TypeLateResult, TypeLeaseLost, TypeRejected,
	TypeApprovalExpired, TypeApprovalEscalated, TypeReconciled, TypeCompensationTimedOut, TypeUnfrozen)

// Outcome is the answer to one entry.
type Outcome string

const (
	OutcomeProceed    Outcome = "proceed"
	OutcomeReplay     Outcome = "replay"
	OutcomeInProgress Outcome = "in_progress"
	OutcomeHeld       Outcome = "held"
	OutcomeCompensate Outcome = "compensate"
	OutcomeRecorded   Outcome = "recorded"
	OutcomeDuplicate  Outcome = "duplicate"
	OutcomeRejected   Outcome = "rejected"
	// OutcomePendingApproval: the intent is held until people approve it.
	OutcomePendingApproval Outcome = "pending_approval"
	// OutcomeDenied: its approval was rejected or expired; do not execute.
	OutcomeDenied Outcome = "denied"
	// OutcomeFrozen: an active freeze covers the tool; nothing changed, try
	// again after Retry-After.
	OutcomeFrozen Outcome = "frozen"
)

// Outcomes lists every outcome.
var Outcomes = []Outcome{OutcomeProceed, OutcomeReplay, OutcomeInProgress, OutcomeHeld, OutcomeCompensate,
	OutcomeRecorded, OutcomeDuplicate, OutcomeRejected, OutcomePendingApproval, OutcomeDenied, OutcomeFrozen}

// Decision is an operator's resolution of an action.
type Decision string

const (
	DecisionConfirm         Decision = "confirm"
	DecisionRetry           Decision = "retry"
	DecisionCompensate      Decision = "compensate"
	DecisionMarkCompensated Decision = "mark_compensated"
	DecisionAbandon         Decision = "abandon"
	// One distinct person's yes to an action awaiting approval, and the no
	// that denies it.
	DecisionApprove Decision = "approve"
	DecisionReject  Decision = "reject"
	// "I looked at it": clears an action's review alerts (key reuse, a
	// stale outcome, a late result) from triage; its status does not
	// change.
	DecisionAcknowledge Decision = "acknowledge"
)

// Decisions lists every decision in the order a person reads them.
var Decisions = []Decision{DecisionConfirm, DecisionRetry, DecisionCompensate, DecisionMarkCompensated, DecisionAbandon,
	DecisionApprove, DecisionReject, DecisionAcknowledge}

// Valid reports whether d is one of Decisions.
func (d Decision) Valid() bool {
	for _, x := range Decisions {
		if d == x {
			return true
		}
	}
	return false
}

// EventType names an alert: a webhook message written with the change that
// causes it.
type EventType string

const (
	EventTimedOut     EventType = "action.timed_out"
	EventDecided      EventType = "action.decided"
	EventKeyReused    EventType = "action.key_reused"
	EventStaleOutcome EventType = "action.stale_outcome"
	EventLateResult   EventType = "action.late_result"
	EventCompensated  EventType = "action.compensated"
	EventFailed       EventType = "action.failed"
	// Approval before execution.
	EventApprovalRequested EventType = "action.approval_requested"
	EventApproved          EventType = "action.approved"
	EventApprovalEscalated EventType = "action.approval_escalated"
	EventApprovalExpired   EventType = "action.approval_expired"
	// EventReconciled: a lookup answered for a timed-out action.
	EventReconciled EventType = "action.reconciled"
	// EventLimitExceeded: a limit held or denied a first intent.
	EventLimitExceeded EventType = "action.limit_exceeded"
	// A freeze started (by a person or a breaker) or was lifted.
	EventFreezeStarted EventType = "freeze.started"
	EventFreezeLifted  EventType = "freeze.lifted"
	// The evidence log signed a checkpoint (data.checkpoint: the note), or
	// its self-check found the tables changed since they were logged.
	EventAuditCheckpoint EventType = "audit.checkpoint"
	EventAuditMismatch   EventType = "audit.mismatch"
	// EventTest is the event of a test message sent from the dashboard or
	// the API; no ledger change causes it.
	EventTest EventType = "webhook.test"
)

// EventTypes lists every event an endpoint can subscribe to.
var EventTypes = []EventType{EventTimedOut, EventDecided, EventKeyReused, EventStaleOutcome,
	EventLateResult, EventCompensated, EventFailed, EventApprovalRequested, EventApproved,
	EventApprovalEscalated, EventApprovalExpired, EventReconciled, EventLimitExceeded, EventFreezeStarted,
	EventFreezeLifted, EventAuditCheckpoint, EventAuditMismatch, EventTest}

// ActorKind says who wrote an entry.
type ActorKind string

const (
	ActorAgent    ActorKind = "agent"
	ActorOperator ActorKind = "operator"
	ActorSystem   ActorKind = "system"
)

// ActorKinds lists every kind of actor.
var ActorKinds = []ActorKind{ActorAgent, ActorOperator, ActorSystem}
