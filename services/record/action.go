package record

import (
	"encoding/json"
	"time"
)

// Action is the authoritative record of one intended side effect, as stored
// and as answered on the wire. The fields without a JSON name are the
// ledger's own: stored, never shown.
type Action struct {
	// ReviewPending is whether the action shows on triage for a review
	// alert no one acknowledged yet; read only where a decision is taken
	// or offered (not part of the record on the wire).
	ReviewPending bool `json:"-"`

	ID          string          `json:"id"`
	Namespace   string          `json:"namespace"`
	Key         string          `json:"key"`
	Tool        string          `json:"tool"`
	Effect      Effect          `json:"effect"`
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
	// compensation underway.
	Reconciliation *Reconciliation `json:"reconciliation"`
	// Limits are what the limits that matched the first intent charged it;
	// nil when none did. Set once, at creation.
	Limits []LimitCharge `json:"limits"`

	RunID       *string `json:"-"`
	Fingerprint string  `json:"-"`
	// Retriable is what the last failed report said.
	Retriable bool `json:"-"`
	// EntrySeq is the seq of the newest entry: every change bumps it.
	EntrySeq int `json:"-"`
	// Deadline is when the sweeper next asks the rules table what the
	// passing of time means for this action (a lease that runs out), or nil.
	// The ledger derives it from the status (see the deadlines table).
	Deadline *time.Time `json:"-"`
}

// Clone returns a copy of a whose approval may be changed apart.
func (a *Action) Clone() *Action {
	c := *a
	c.Approval = a.Approval.Clone()
	c.Reconciliation = a.Reconciliation.Clone()
	return &c
}

// Actor says who wrote an entry.
type Actor struct {
	Kind ActorKind `json:"kind"`
	Name string    `json:"name"`
	// Via says how an operator decided: "dashboard" or "api_key:<key name>";
	// Name is then the person (a user's email, a key's owner), or the key's
	// name for a key without an owner.
	Via string `json:"via,omitempty"`
}

// Entry is one immutable ledger record.
type Entry struct {
	ID         string          `json:"id"`
	Seq        int             `json:"seq"`
	Type       EntryType       `json:"type"`
	Actor      Actor           `json:"actor"`
	Attempt    *int            `json:"attempt"`
	Payload    json.RawMessage `json:"payload"`
	OccurredAt *time.Time      `json:"occurred_at"`
	RecordedAt time.Time       `json:"recorded_at"`
	// LogIndex is the entry's leaf in the evidence log, once it joined it
	// (within 2 s of its commit).
	LogIndex *int64 `json:"log_index,omitempty"`
}
