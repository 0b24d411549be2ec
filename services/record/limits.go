package record

import (
	"encoding/json"
	"fmt"
)

// Limits across actions (SPEC "Limits across actions"): a limit charges the
// first intents it matches an amount in their business group, and an intent
// that would take its group's counted use over the limit's max is held or
// denied.

// Limit modes and what a limit does to an intent over it.
const (
	LimitEnforce = "enforce"
	LimitShadow  = "shadow"
	LimitHold    = "hold"
	LimitDeny    = "deny"
)

// LimitCharge is what one limit charged an action's first intent: the
// action's "limits" list. Exceeded says the intent took the group over the
// limit's max (or its amount could not be evaluated: fail closed), whether
// or not the limit acted on it (a shadow limit does not).
type LimitCharge struct {
	ID       string  `json:"id"`
	Name     string  `json:"name"`
	Version  int     `json:"version"`
	Group    string  `json:"group"`
	Amount   float64 `json:"amount"`
	Exceeded bool    `json:"exceeded"`
	// Used and Max are the group's counted use before the charge and the
	// limit's max then: kept with the action so that a retry of a denied
	// key learns the same as its first intent, not part of its JSON.
	// Denied says this limit denied the action.
	Used   float64 `json:"-"`
	Max    float64 `json:"-"`
	Denied bool    `json:"-"`
}

// Over is the charge as an error or an approval lists an exceeded limit.
func (c LimitCharge) Over() ApprovalLimit {
	return ApprovalLimit{ID: c.ID, Name: c.Name, Version: c.Version, Group: c.Group, Used: c.Used, Amount: c.Amount, Max: c.Max}
}

// storedCharge is a charge as the actions table keeps it.
type storedCharge struct {
	ID       string  `json:"id"`
	Name     string  `json:"name"`
	Version  int     `json:"version"`
	Group    string  `json:"group"`
	Amount   float64 `json:"amount"`
	Exceeded bool    `json:"exceeded"`
	Used     float64 `json:"used"`
	Max      float64 `json:"max"`
	Denied   bool    `json:"denied,omitempty"`
}

// LimitCheck is how one limit judged a first intent, as the intent's entry
// records it: the charge, the group's counted use before it, the max, what
// the limit does over it and whether it enforces. Error is why the amount
// or the group could not be evaluated.
type LimitCheck struct {
	Amount   float64 `json:"amount"`
	Error    string  `json:"error,omitempty"`
	Exceeded bool    `json:"exceeded"`
	Group    string  `json:"group"`
	ID       string  `json:"id"`
	Max      float64 `json:"max"`
	Mode     string  `json:"mode"`
	Name     string  `json:"name"`
	Over     string  `json:"over"`
	Used     float64 `json:"used"`
	Version  int     `json:"version"`
	// Approvals is how many people must approve an intent the limit holds.
	Approvals int `json:"-"`
}

// Holds reports whether the check holds its intent for approval.
func (c LimitCheck) Holds() bool { return c.Exceeded && c.Mode == LimitEnforce && c.Over == LimitHold }

// Denies reports whether the check denies its intent.
func (c LimitCheck) Denies() bool { return c.Exceeded && c.Mode == LimitEnforce && c.Over == LimitDeny }

// Charge is the check as the action carries it.
func (c LimitCheck) Charge() LimitCharge {
	return LimitCharge{ID: c.ID, Name: c.Name, Version: c.Version, Group: c.Group, Amount: c.Amount, Exceeded: c.Exceeded,
		Used: c.Used, Max: c.Max, Denied: c.Denies()}
}

// ApprovalLimit is a limit that holds an action for approval: the
// approval's "limits", with the group's use when the intent came and the
// max that people may let it run over.
type ApprovalLimit struct {
	ID      string  `json:"id"`
	Name    string  `json:"name"`
	Version int     `json:"version"`
	Group   string  `json:"group"`
	Used    float64 `json:"used"`
	Amount  float64 `json:"amount"`
	Max     float64 `json:"max"`
}

// MarshalLimits is the stored form of an action's limits: nil for none.
func MarshalLimits(cs []LimitCharge) []byte {
	if cs == nil {
		return nil
	}
	st := make([]storedCharge, len(cs))
	for i, c := range cs {
		st[i] = storedCharge(c)
	}
	b, _ := json.Marshal(st)
	return b
}

// UnmarshalLimits reads an action's stored limits (nil for NULL).
func UnmarshalLimits(b []byte) ([]LimitCharge, error) {
	if len(b) == 0 || string(b) == "null" {
		return nil, nil
	}
	var st []storedCharge
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("record: stored limits: %w", err)
	}
	cs := make([]LimitCharge, len(st))
	for i, c := range st {
		cs[i] = LimitCharge(c)
	}
	return cs, nil
}
