package models

import "time"

// Policy decides which first intents of a namespace need approval. Tools is
// a JSON array of patterns. Version grows with every change.
type Policy struct {
	ID                string `gorm:"primaryKey"`
	Namespace         string
	Name              string
	Tools             string
	Condition         string
	ApprovalsRequired int
	ExpiresAfter      int
	EscalateAfter     *int
	// Mode is enforce, or shadow: evaluated and recorded, never enforced.
	Mode      string
	Enabled   bool
	Version   int
	CreatedAt time.Time
	UpdatedAt time.Time
	DeletedAt *time.Time
}

// PolicyVersion is a policy as it was at one version, as JSON.
type PolicyVersion struct {
	PolicyID  string `gorm:"primaryKey"`
	Version   int    `gorm:"primaryKey"`
	Policy    string
	CreatedAt time.Time
}
