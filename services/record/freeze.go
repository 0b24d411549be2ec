package record

import "time"

// Freeze is the brake on a namespace's tools (SPEC "Limits across
// actions"), as the API shows it: who started it and why, and once lifted,
// who lifted it and why. A breaker's freeze is started by the system, named
// "breaker:<name>".
type Freeze struct {
	ID         string     `json:"id"`
	Namespace  string     `json:"namespace"`
	Tools      []string   `json:"tools"`
	Reason     string     `json:"reason"`
	By         Actor      `json:"by"`
	BreakerID  *string    `json:"breaker_id"`
	StartedAt  time.Time  `json:"started_at"`
	LiftedAt   *time.Time `json:"lifted_at"`
	LiftedBy   *Actor     `json:"lifted_by"`
	LiftReason *string    `json:"lift_reason"`
}

// Active reports whether the freeze still holds.
func (f *Freeze) Active() bool { return f.LiftedAt == nil }

// Ref names the freeze as the actions it holds name it.
func (f *Freeze) Ref() FreezeRef { return FreezeRef{ID: f.ID, Reason: f.Reason} }
