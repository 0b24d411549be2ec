package models

import "time"

// Freeze stops new work of a namespace's tools until someone lifts it.
// Tools is a JSON array of patterns. By is who started it: an operator, or
// the system for a breaker (BreakerID); Lifted… who lifted it and why.
type Freeze struct {
	ID         string `gorm:"primaryKey"`
	Namespace  string
	Tools      string
	Reason     string
	ByKind     string
	ByName     string
	ByVia      string
	BreakerID  *string
	StartedAt  time.Time
	LiftedAt   *time.Time
	LiftedKind *string
	LiftedName *string
	LiftedVia  *string
	LiftReason *string
	ReleasedAt *time.Time
}

// Breaker starts a freeze of its tools when too many of their recent
// actions end unknown or failed. A nil ratio is not checked.
type Breaker struct {
	ID              string `gorm:"primaryKey"`
	Namespace       string
	Name            string
	Tools           string
	WindowSeconds   int
	MinActions      int
	MaxUnknownRatio *float64
	MaxFailureRatio *float64
	Enabled         bool
	Version         int
	CreatedAt       time.Time
	UpdatedAt       time.Time
	DeletedAt       *time.Time
}

// BreakerVersion is a breaker as it was at one version, as JSON.
type BreakerVersion struct {
	BreakerID  string `gorm:"primaryKey"`
	Version    int    `gorm:"primaryKey"`
	BreakerDef string
	CreatedAt  time.Time
}
