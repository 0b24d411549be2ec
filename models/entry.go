package models

import "time"

// Entry is one immutable ledger record about an action. Entries are only ever
// inserted, and deleted only by retention together with their action.
type Entry struct {
	ID         string `gorm:"primaryKey"`
	ActionID   string
	Namespace  string
	Seq        int
	Type       string
	ActorKind  string
	ActorName  string
	Attempt    *int
	Payload    []byte // JSON object
	OccurredAt *time.Time
	RecordedAt time.Time
}
