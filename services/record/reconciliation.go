package record

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"
)

// Answer is what a lookup found out about an attempt whose outcome was
// unknown: whether the downstream has the effect.
type Answer string

const (
	// AnswerHappened: the downstream has the effect; the action is
	// confirmed with the evidence.
	AnswerHappened Answer = "happened"
	// AnswerNotHappened: the downstream provably has no such effect.
	AnswerNotHappened Answer = "not_happened"
	// AnswerUnknown: the downstream could not say (it cannot be searched,
	// or it failed); a person decides.
	AnswerUnknown Answer = "unknown"
)

// Answers lists every answer.
var Answers = []Answer{AnswerHappened, AnswerNotHappened, AnswerUnknown}

// Valid reports whether a is one of Answers.
func (a Answer) Valid() bool {
	for _, x := range Answers {
		if a == x {
			return true
		}
	}
	return false
}

// MaxLookups is how many lookups one attempt gets; the next is held for a
// person.
const MaxLookups = 3

// Reconciliation is what an action carries about finding out what happened:
// how long the downstream honours its key, the lookups of its current
// attempt and the last answer, and how its compensation went. Actions that
// never needed any carry none.
type Reconciliation struct {
	// KeyExpiresAt is when the downstream stops honouring the key (the
	// action's creation plus the intent's key_ttl); after it a keyed action
	// counts as unkeyed.
	KeyExpiresAt *time.Time `json:"key_expires_at"`
	// LookupAttempt is the attempt Lookups counts for.
	LookupAttempt int `json:"lookup_attempt"`
	Lookups       int `json:"lookups"`
	// LookupUntil is the lease of the lookup in flight, if any.
	LookupUntil *time.Time `json:"lookup_until"`
	// LastLookup is the newest answer for the current attempt.
	LastLookup *LookupAnswer `json:"last_lookup"`
	// CompensationFailures counts compensation_failed reports; the newest
	// error is CompensationError, and CompensationRetriable what it said
	// about trying again (workers leave a final failure to a person).
	CompensationFailures  int     `json:"compensation_failures"`
	CompensationError     *string `json:"compensation_error"`
	CompensationRetriable bool    `json:"compensation_retriable"`
	// CompensationTimedOut is set when a compensation lease passed without
	// a report: whether the undo happened is unknown, so intents are held
	// until an operator decides.
	CompensationTimedOut bool `json:"compensation_timed_out"`
}

// LookupAnswer is one answered lookup, as the action keeps it for whoever
// decides next.
type LookupAnswer struct {
	Attempt     int       `json:"attempt"`
	Answer      Answer    `json:"answer"`
	At          time.Time `json:"at"`
	By          Actor     `json:"by"`
	ExternalRef *string   `json:"external_ref"`
	// Said is the start of the evidence the downstream gave, as compact
	// JSON (the whole of it is in the lookup_result entry).
	Said string `json:"said"`
}

// MaxSaid bounds LookupAnswer.Said.
const MaxSaid = 200

// Clone copies r, or returns nil.
func (r *Reconciliation) Clone() *Reconciliation {
	if r == nil {
		return nil
	}
	c := *r
	if r.LastLookup != nil {
		l := *r.LastLookup
		c.LastLookup = &l
	}
	return &c
}

// KeyExpired reports whether the downstream no longer honours the
// action's key at now.
func (a *Action) KeyExpired(now time.Time) bool {
	r := a.Reconciliation
	return r != nil && r.KeyExpiresAt != nil && !now.Before(*r.KeyExpiresAt)
}

// EffectAt is the action's effect class as far as a repeat at now is
// concerned: a keyed action whose key outlived the downstream's retention
// counts as unkeyed.
func (a *Action) EffectAt(now time.Time) Effect {
	if a.Effect == EffectKeyed && a.KeyExpired(now) {
		return EffectUnkeyed
	}
	return a.Effect
}

// MarshalStored encodes r for the actions table, or nil for none.
func (r *Reconciliation) MarshalStored() []byte {
	if r == nil {
		return nil
	}
	b, err := json.Marshal(r)
	if err != nil {
		panic(fmt.Sprintf("record: marshal reconciliation: %v", err))
	}
	return b
}

// UnmarshalStoredReconciliation decodes the actions table's reconciliation
// column; nil or JSON null is none.
func UnmarshalStoredReconciliation(b []byte) (*Reconciliation, error) {
	if len(b) == 0 || string(b) == "null" {
		return nil, nil
	}
	var r Reconciliation
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("record: stored reconciliation: %w", err)
	}
	for _, t := range []**time.Time{&r.KeyExpiresAt, &r.LookupUntil} {
		if *t != nil {
			u := (*t).UTC()
			*t = &u
		}
	}
	if r.LastLookup != nil {
		r.LastLookup.At = r.LastLookup.At.UTC()
	}
	return &r, nil
}

// LookupPayload records a lookup granted: its lease, in seconds.
type LookupPayload struct {
	RunID   *string `json:"run_id,omitempty"`
	Timeout float64 `json:"timeout"`
}

// LookupResultPayload records what a lookup found: the answer and the
// downstream's evidence.
type LookupResultPayload struct {
	Answer      Answer          `json:"answer"`
	Evidence    json.RawMessage `json:"evidence,omitempty"`
	ExternalRef *string         `json:"external_ref,omitempty"`
	Result      json.RawMessage `json:"result,omitempty"`
	RunID       *string         `json:"run_id,omitempty"`
}

// ReconciledPayload records the change a lookup's answer made, as a system
// entry naming the lookup_result entry (its seq) that caused it.
type ReconciledPayload struct {
	Answer    Answer `json:"answer"`
	LookupSeq int    `json:"lookup_seq"`
	Status    Status `json:"status"`
}

// Said is the start of a lookup's evidence as compact JSON, cut at a rune
// boundary: what triage shows beside the answer.
func Said(evidence json.RawMessage) string {
	if len(evidence) == 0 || string(evidence) == "null" {
		return ""
	}
	var b bytes.Buffer
	if json.Compact(&b, evidence) != nil {
		return ""
	}
	out := b.String()
	var plain string
	if json.Unmarshal(b.Bytes(), &plain) == nil {
		out = plain // a bare string says it best without quotes
	}
	if len(out) <= MaxSaid {
		return out
	}
	cut := MaxSaid
	for cut > 0 && !utf8.RuneStart(out[cut]) {
		cut--
	}
	return out[:cut] + "…"
}
