package models

import "time"

// Limit is a budget or a rate of a namespace's first intents, per business
// group. Tools is a JSON array of patterns; Condition, Amount and GroupBy
// are CEL. Version grows with every change.
type Limit struct {
	ID                string `gorm:"primaryKey"`
	Namespace         string
	Name              string
	Tools             string
	Condition         string
	Amount            string
	GroupBy           string
	WindowSeconds     int
	MaxAmount         float64
	OverAction        string
	ApprovalsRequired int
	Mode              string
	Enabled           bool
	Version           int
	CreatedAt         time.Time
	UpdatedAt         time.Time
	DeletedAt         *time.Time
}

// LimitVersion is a limit as it was at one version, as JSON.
type LimitVersion struct {
	LimitID   string `gorm:"primaryKey"`
	Version   int    `gorm:"primaryKey"`
	LimitDef  string
	CreatedAt time.Time
}
