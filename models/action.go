package models

import "time"

// Action is the authoritative record of one intended side effect, identified
// by (Namespace, Key).
type Action struct {
	ID          string `gorm:"primaryKey"`
	Namespace   string
	Key         string
	Tool        string
	Effect      string
	Status      string
	Attempt     int
	Version     int
	LeaseUntil  *time.Time
	Reference   *string
	Agent       *string
	RunID       *string
	Fingerprint string
	Params      []byte // canonical JSON
	Result      []byte // JSON or nil
	ExternalRef *string
	Retriable   bool // the last failure may be retried by a new intent
	EntrySeq    int  // seq of the newest entry
	CreatedAt   time.Time
	UpdatedAt   time.Time
}
