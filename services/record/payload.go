package record

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
)

// The payload of every entry type is one of the structs below: the ledger
// writes it, and the timeline, the outbox and the SDKs read it back through
// DecodePayload. Fields are in alphabetical order of their JSON names, the
// order the ledger wrote them in before payloads were typed, so stored
// payloads keep their bytes.

// Payload is one of the payload structs of this package, and nothing else:
// its method is unexported, so a value of another type cannot be written as
// an entry's payload, and a type switch over payloads names only these.
type Payload interface{ entryPayload() }

func (*IntentPayload) entryPayload()           {}
func (*ApprovalDeadlinePayload) entryPayload() {}
func (*UnfrozenPayload) entryPayload()         {}
func (*KeyReusedPayload) entryPayload()        {}
func (*ReportPayload) entryPayload()           {}
func (*DecisionPayload) entryPayload()         {}
func (*TimedOutPayload) entryPayload()         {}
func (*LookupPayload) entryPayload()           {}
func (*LookupResultPayload) entryPayload()     {}
func (*ReconciledPayload) entryPayload()       {}

// IntentPayload is what an intent entry records beside its own columns.
type IntentPayload struct {
	// Approval is set on a first intent held for approval: what it needs
	// and why.
	Approval *ApprovalRequest `json:"approval,omitempty"`
	Effect   *Effect          `json:"effect,omitempty"`
	// KeyTTL is how long the downstream honours the key, in seconds.
	KeyTTL *float64 `json:"key_ttl,omitempty"`
	// Limits are how the limits that matched judged the intent, shadow
	// limits included.
	Limits    []LimitCheck `json:"limits,omitempty"`
	Reference *string      `json:"reference,omitempty"`
	RunID     *string      `json:"run_id,omitempty"`
	// ShadowPolicies are the policies in shadow mode that would have held
	// the intent: recorded, not enforced.
	ShadowPolicies []PolicyRef `json:"shadow_policies,omitempty"`
	// Timeout is the lease asked for, in seconds (the default when the
	// intent named none).
	Timeout float64 `json:"timeout"`
	Tool    string  `json:"tool"`
}

// ApprovalRequest records why a first intent was held: the approvals it
// needs, its deadlines, the policies that caught it (or that the intent
// asked itself), and a condition that failed to evaluate (fail closed).
type ApprovalRequest struct {
	Error           string          `json:"error,omitempty"`
	EscalateAt      *time.Time      `json:"escalate_at,omitempty"`
	ExpiresAt       time.Time       `json:"expires_at"`
	FrozenBy        []FreezeRef     `json:"frozen_by,omitempty"`
	Limits          []ApprovalLimit `json:"limits,omitempty"`
	Policies        []PolicyRef     `json:"policies"`
	Required        int             `json:"required"`
	RequireApproval bool            `json:"require_approval,omitempty"`
	// Shadow are the policies in shadow mode that matched: recorded on the
	// intent's entry (IntentPayload.ShadowPolicies), never enforced.
	Shadow []PolicyRef `json:"-"`
}

// ApprovalDeadlinePayload records an approval deadline that passed: the
// expiry (the action is denied) or the escalation.
type ApprovalDeadlinePayload struct {
	Approvals  int        `json:"approvals"`
	EscalateAt *time.Time `json:"escalate_at,omitempty"`
	ExpiresAt  time.Time  `json:"expires_at"`
	Required   int        `json:"required"`
}

// UnfrozenPayload records a lifted freeze that held the action: which one,
// who lifted it and why, and the freezes that still hold it.
type UnfrozenPayload struct {
	Freeze   FreezeRef   `json:"freeze"`
	LiftedBy Actor       `json:"lifted_by"`
	Reason   string      `json:"reason"`
	FrozenBy []FreezeRef `json:"frozen_by"`
	Approved bool        `json:"approved"`
}

// KeyReusedPayload records an intent that offered a used key with another
// tool or other params: what it offered, so an operator can compare.
type KeyReusedPayload struct {
	Effect      *Effect         `json:"effect,omitempty"`
	Fingerprint string          `json:"fingerprint"`
	Params      json.RawMessage `json:"params"`
	Reference   *string         `json:"reference,omitempty"`
	RunID       *string         `json:"run_id,omitempty"`
	Timeout     float64         `json:"timeout"`
	Tool        string          `json:"tool"`
}

// ReportPayload keeps what an agent's entry said apart from the fields that
// have columns of their own: heartbeats, outcomes and notes, and the entries
// Arbiter records for reports it could not apply as they came (late, stale,
// after the lease, or not allowed). Type is the type the agent sent when
// the entry's own type differs from it.
type ReportPayload struct {
	Error       *string         `json:"error,omitempty"`
	ExternalRef *string         `json:"external_ref,omitempty"`
	Message     *string         `json:"message,omitempty"`
	Result      json.RawMessage `json:"result,omitempty"`
	Retriable   *bool           `json:"retriable,omitempty"`
	RunID       *string         `json:"run_id,omitempty"`
	Timeout     *float64        `json:"timeout,omitempty"`
	Tool        *string         `json:"tool,omitempty"`
	Type        EntryType       `json:"type,omitempty"`
}

// DecisionPayload records an operator's decision.
type DecisionPayload struct {
	AcknowledgeDuplicateRisk bool            `json:"acknowledge_duplicate_risk,omitempty"`
	Decision                 Decision        `json:"decision"`
	ExpectedVersion          *int            `json:"expected_version,omitempty"`
	ExternalRef              *string         `json:"external_ref,omitempty"`
	Reason                   string          `json:"reason"`
	Result                   json.RawMessage `json:"result,omitempty"`
	// Via is how the operator decided ("dashboard", "api_key:<key name>"):
	// the entry's actor.via, kept here so the entries table needs no column
	// for it (ActorVia reads it back).
	Via string `json:"via,omitempty"`
}

// ActorVia is the actor's via of a decision entry's payload, or "".
func ActorVia(t EntryType, payload []byte) string {
	if t != TypeDecision || !bytes.Contains(payload, []byte(`"via"`)) {
		return ""
	}
	var p struct {
		Via string `json:"via"`
	}
	if json.Unmarshal(payload, &p) != nil {
		return ""
	}
	return p.Via
}

// TimedOutPayload records the lease that passed.
type TimedOutPayload struct {
	LeaseUntil *time.Time `json:"lease_until"`
}

// NewPayload returns a pointer to a zero payload of the entry type t, for
// decoding, or nil for a type the ledger does not know.
func NewPayload(t EntryType) Payload {
	switch t {
	case TypeIntent:
		return &IntentPayload{}
	case TypeKeyReused:
		return &KeyReusedPayload{}
	case TypeHeartbeat, TypeSucceeded, TypeFailed, TypeOutcomeUnknown, TypeCompensated, TypeNote, TypeCompensationFailed,
		TypeStaleOutcome, TypeStaleHeartbeat, TypeLateResult, TypeLeaseLost, TypeRejected:
		return &ReportPayload{}
	case TypeDecision:
		return &DecisionPayload{}
	case TypeLookup:
		return &LookupPayload{}
	case TypeLookupResult:
		return &LookupResultPayload{}
	case TypeReconciled:
		return &ReconciledPayload{}
	case TypeTimedOut, TypeCompensationTimedOut:
		return &TimedOutPayload{}
	case TypeApprovalExpired, TypeApprovalEscalated:
		return &ApprovalDeadlinePayload{}
	case TypeUnfrozen:
		return &UnfrozenPayload{}
	}
	return nil
}

// DecodePayload decodes an entry's payload into the struct of its type.
func DecodePayload(e *Entry) (Payload, error) {
	p := NewPayload(e.Type)
	if p == nil {
		return nil, fmt.Errorf("record: entry type %q has no payload type", e.Type)
	}
	if len(e.Payload) == 0 {
		return p, nil
	}
	if err := json.Unmarshal(e.Payload, p); err != nil {
		return nil, fmt.Errorf("record: %s payload: %w", e.Type, err)
	}
	return p, nil
}

// MarshalPayload encodes a payload the ledger built from validated input,
// which cannot fail to encode.
func MarshalPayload(p Payload) json.RawMessage {
	if p == nil {
		return json.RawMessage(`{}`)
	}
	b, err := json.Marshal(p)
	if err != nil {
		panic(fmt.Sprintf("record: marshal payload: %v", err))
	}
	return b
}
