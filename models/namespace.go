package models

import "time"

// Namespace is an isolation unit: a team or an agent fleet. Keys are unique
// per namespace, and API keys other than admin keys belong to exactly one.
type Namespace struct {
	Name      string    `gorm:"primaryKey"`
	CreatedAt time.Time `gorm:"not null"`
}
