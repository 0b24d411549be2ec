package services

import (
	"encoding/json"
	"time"
)

// Role is what an API key or a principal may do.
type Role string

const (
	RoleAgent    Role = "agent"    // write entries, read its namespace
	RoleReader   Role = "reader"   // read its namespace
	RoleOperator Role = "operator" // read and decide in its namespace
	RoleAdmin    Role = "admin"    // global
)

// Principal is the authenticated caller of a service method.
type Principal struct {
	Kind      string // "api_key" or "user"
	ID        string
	Name      string
	Role      Role
	Namespace string // empty for admins
}

// CanWrite reports whether p may write entries.
func (p Principal) CanWrite() bool { return p.Role == RoleAgent }

// CanDecide reports whether p may take operator decisions.
func (p Principal) CanDecide() bool { return p.Role == RoleOperator || p.Role == RoleAdmin }

// Sees reports whether p may see data of namespace ns.
func (p Principal) Sees(ns string) bool { return p.Global() || p.Namespace == ns }

// Global reports whether p sees every namespace: admin keys and dashboard
// users do.
func (p Principal) Global() bool { return p.Role == RoleAdmin || p.Kind == "user" }

// Status of an action.
type Status string

const (
	StatusInProgress            Status = "in_progress"
	StatusSucceeded             Status = "succeeded"
	StatusFailed                Status = "failed"
	StatusTimedOut              Status = "timed_out"
	StatusRetryRequested        Status = "retry_requested"
	StatusConfirmed             Status = "confirmed"
	StatusCompensationRequested Status = "compensation_requested"
	StatusCompensated           Status = "compensated"
	StatusAbandoned             Status = "abandoned"
)

// Statuses lists every status in lifecycle order.
var Statuses = []Status{StatusInProgress, StatusSucceeded, StatusFailed, StatusTimedOut,
	StatusRetryRequested, StatusConfirmed, StatusCompensationRequested, StatusCompensated, StatusAbandoned}

// Terminal reports whether no agent or system event moves the action on by
// itself; retention may prune terminal actions.
func (s Status) Terminal() bool {
	switch s {
	case StatusSucceeded, StatusFailed, StatusConfirmed, StatusCompensated, StatusAbandoned:
		return true
	}
	return false
}

// Effect classes say how safe a repeat is.
const (
	EffectReadOnly   = "read_only"
	EffectIdempotent = "idempotent"
	EffectKeyed      = "keyed"
	EffectUnkeyed    = "unkeyed"
)

// Entry types sent by agents.
const (
	TypeIntent      = "intent"
	TypeHeartbeat   = "heartbeat"
	TypeSucceeded   = "succeeded"
	TypeFailed      = "failed"
	TypeCompensated = "compensated"
	TypeNote        = "note"
)

// Entry types recorded by Arbiter.
const (
	TypeTimedOut       = "timed_out"
	TypeDecision       = "decision"
	TypeKeyReused      = "key_reused"
	TypeStaleOutcome   = "stale_outcome"
	TypeStaleHeartbeat = "stale_heartbeat"
	TypeLateResult     = "late_result"
	TypeLeaseLost      = "lease_lost"
	TypeRejected       = "rejected"
)

// Outcomes of an entry.
const (
	OutcomeProceed    = "proceed"
	OutcomeReplay     = "replay"
	OutcomeInProgress = "in_progress"
	OutcomeHeld       = "held"
	OutcomeCompensate = "compensate"
	OutcomeRecorded   = "recorded"
	OutcomeDuplicate  = "duplicate"
	OutcomeRejected   = "rejected"
)

// Alert events, written to the outbox with the change that causes them.
const (
	EventTimedOut     = "action.timed_out"
	EventDecided      = "action.decided"
	EventKeyReused    = "action.key_reused"
	EventStaleOutcome = "action.stale_outcome"
	EventLateResult   = "action.late_result"
	EventCompensated  = "action.compensated"
	EventFailed       = "action.failed"
)

// Action is the authoritative record of one intended side effect.
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

	runID       *string
	fingerprint string
	retriable   bool
	entrySeq    int
}

// Actor says who wrote an entry.
type Actor struct {
	Kind string `json:"kind"` // agent, operator or system
	Name string `json:"name"`
}

// Entry is one immutable ledger record.
type Entry struct {
	ID         string          `json:"id"`
	Seq        int             `json:"seq"`
	Type       string          `json:"type"`
	Actor      Actor           `json:"actor"`
	Attempt    *int            `json:"attempt"`
	Payload    json.RawMessage `json:"payload"`
	OccurredAt *time.Time      `json:"occurred_at"`
	RecordedAt time.Time       `json:"recorded_at"`
}
