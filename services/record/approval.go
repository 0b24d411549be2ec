package record

import (
	"encoding/json"
	"fmt"
	"time"
)

// Approval is what an action held for approval carries: how many distinct
// people must say yes, who did, the deadlines, the policies that caught it
// (each at the version it had then) and the rejection, if any. Actions that
// needed no approval carry none.
type Approval struct {
	Required   int         `json:"required"`
	Approvals  []Vote      `json:"approvals"`
	ExpiresAt  time.Time   `json:"expires_at"`
	EscalateAt *time.Time  `json:"escalate_at"`
	Policies   []PolicyRef `json:"policies"`
	// Limits are the limits whose max the action would take its group
	// over: people who approve it let it run over them.
	Limits []ApprovalLimit `json:"limits"`
	// FrozenBy are the active freezes that hold the action: it is approved
	// only once every one of them is lifted.
	FrozenBy  []FreezeRef `json:"frozen_by"`
	Rejection *Vote       `json:"rejection"`
	// Escalated is set once the escalation deadline passed and was alerted.
	Escalated bool `json:"-"`
	// Error is why a policy's condition could not be evaluated: the intent
	// was held anyway (fail closed).
	Error string `json:"-"`
}

// Vote is one person's yes, or the rejection. Identity tells distinct
// people apart (a dashboard user's or an API key's id); it is stored, never
// shown.
type Vote struct {
	By       Actor     `json:"by"`
	At       time.Time `json:"at"`
	Reason   string    `json:"reason"`
	Identity string    `json:"-"`
}

// PolicyRef names a policy at the version that caught the action.
type PolicyRef struct {
	// Error is why the policy's condition failed at run time (the intent
	// was held anyway: fail closed); empty when it evaluated.
	Error   string `json:"error,omitempty"`
	ID      string `json:"id"`
	Name    string `json:"name"`
	Version int    `json:"version"`
}

// MarshalJSON writes the approval with its lists as lists: an action held
// a moment ago, that nobody approved yet, has "approvals": [], not null.
func (a Approval) MarshalJSON() ([]byte, error) {
	type plain Approval // without this method
	p := plain(a)
	if p.Approvals == nil {
		p.Approvals = []Vote{}
	}
	if p.Policies == nil {
		p.Policies = []PolicyRef{}
	}
	if p.Limits == nil {
		p.Limits = []ApprovalLimit{}
	}
	if p.FrozenBy == nil {
		p.FrozenBy = []FreezeRef{}
	}
	return json.Marshal(p)
}

// Approved reports whether enough distinct people said yes and no freeze
// holds the action any longer.
func (a *Approval) Approved() bool { return len(a.Approvals) >= a.Required && len(a.FrozenBy) == 0 }

// Unfreeze drops freeze id from the freezes that hold the action and
// reports whether it was one of them.
func (a *Approval) Unfreeze(id string) bool {
	for i, f := range a.FrozenBy {
		if f.ID == id {
			a.FrozenBy = append(a.FrozenBy[:i:i], a.FrozenBy[i+1:]...)
			return true
		}
	}
	return false
}

// FreezeRef names a freeze that holds an action, with its reason.
type FreezeRef struct {
	ID     string `json:"id"`
	Reason string `json:"reason"`
}

// Voted reports whether identity already approved.
func (a *Approval) Voted(identity string) bool {
	for _, v := range a.Approvals {
		if v.Identity == identity {
			return true
		}
	}
	return false
}

// Clone copies the approval deeply enough to change its votes.
func (a *Approval) Clone() *Approval {
	if a == nil {
		return nil
	}
	c := *a
	c.Approvals = append([]Vote(nil), a.Approvals...)
	c.FrozenBy = append([]FreezeRef(nil), a.FrozenBy...)
	return &c
}

// Deadline is when the sweeper must next look at the approval: the
// escalation until it happened, then the expiry.
func (a *Approval) Deadline() *time.Time {
	if a.EscalateAt != nil && !a.Escalated && a.EscalateAt.Before(a.ExpiresAt) {
		t := *a.EscalateAt
		return &t
	}
	t := a.ExpiresAt
	return &t
}

// storedApproval and storedVote are the approval as the database keeps it:
// with the fields never shown.
type storedApproval struct {
	Required   int             `json:"required"`
	Approvals  []storedVote    `json:"approvals"`
	ExpiresAt  time.Time       `json:"expires_at"`
	EscalateAt *time.Time      `json:"escalate_at,omitempty"`
	Policies   []PolicyRef     `json:"policies"`
	Limits     []ApprovalLimit `json:"limits,omitempty"`
	FrozenBy   []FreezeRef     `json:"frozen_by,omitempty"`
	Rejection  *storedVote     `json:"rejection,omitempty"`
	Escalated  bool            `json:"escalated,omitempty"`
	Error      string          `json:"error,omitempty"`
}

type storedVote struct {
	By       Actor     `json:"by"`
	At       time.Time `json:"at"`
	Reason   string    `json:"reason"`
	Identity string    `json:"identity"`
}

// MarshalStored encodes the approval for the actions table, or nil for
// none.
func (a *Approval) MarshalStored() []byte {
	if a == nil {
		return nil
	}
	s := storedApproval{Required: a.Required, Approvals: []storedVote{}, ExpiresAt: a.ExpiresAt,
		EscalateAt: a.EscalateAt, Policies: a.Policies, Limits: a.Limits, FrozenBy: a.FrozenBy, Escalated: a.Escalated,
		Error: a.Error}
	if s.Policies == nil {
		s.Policies = []PolicyRef{}
	}
	for _, v := range a.Approvals {
		s.Approvals = append(s.Approvals, storedVote(v))
	}
	if a.Rejection != nil {
		r := storedVote(*a.Rejection)
		s.Rejection = &r
	}
	b, err := json.Marshal(s)
	if err != nil {
		panic(fmt.Sprintf("record: marshal approval: %v", err))
	}
	return b
}

// UnmarshalStoredApproval decodes the actions table's approval column; nil
// or JSON null is no approval.
func UnmarshalStoredApproval(b []byte) (*Approval, error) {
	if len(b) == 0 || string(b) == "null" {
		return nil, nil
	}
	var s storedApproval
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("record: stored approval: %w", err)
	}
	a := &Approval{Required: s.Required, Approvals: []Vote{}, ExpiresAt: s.ExpiresAt.UTC(), EscalateAt: s.EscalateAt,
		Policies: s.Policies, Limits: s.Limits, FrozenBy: s.FrozenBy, Escalated: s.Escalated, Error: s.Error}
	if a.EscalateAt != nil {
		t := a.EscalateAt.UTC()
		a.EscalateAt = &t
	}
	if a.Policies == nil {
		a.Policies = []PolicyRef{}
	}
	for _, v := range s.Approvals {
		v.At = v.At.UTC()
		a.Approvals = append(a.Approvals, Vote(v))
	}
	if s.Rejection != nil {
		r := Vote(*s.Rejection)
		r.At = r.At.UTC()
		a.Rejection = &r
	}
	return a, nil
}
