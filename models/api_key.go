package models

import "time"

// APIKey is a credential for agents and automation. Only the SHA-256 hash of
// the secret is stored; Prefix is the short, non-secret beginning shown in
// listings so people can tell keys apart.
type APIKey struct {
	ID        string  `gorm:"primaryKey"`
	Namespace *string // nil for admin keys
	Name      string  `gorm:"not null"`
	Role      string  `gorm:"not null"`
	Prefix    string  `gorm:"not null"`
	Hash      []byte  `gorm:"not null;uniqueIndex"`
	// OwnerID is the user the key belongs to, the person its approvals
	// count as; nil for a key without an owner, which may not approve.
	OwnerID    *string
	Owner      *User `gorm:"foreignKey:OwnerID"`
	CreatedAt  time.Time
	LastUsedAt *time.Time
	RevokedAt  *time.Time
}

func (APIKey) TableName() string { return "api_keys" }
