package models

import "time"

// WebhookEndpoint is a receiver of alerts. EventTypes and Namespaces are JSON
// arrays; an empty Namespaces array means every namespace.
type WebhookEndpoint struct {
	ID                  string `gorm:"primaryKey"`
	URL                 string `gorm:"column:url"`
	EventTypes          string
	Namespaces          string
	Format              string
	Description         string
	Enabled             bool
	DisabledReason      *string
	Secret              string
	PreviousSecret      *string
	PreviousSecretUntil *time.Time
	FailingSince        *time.Time
	CreatedAt           time.Time
	UpdatedAt           time.Time
}

// WebhookMessage is one alert in the outbox.
type WebhookMessage struct {
	ID        string `gorm:"primaryKey"`
	EventType string
	Namespace *string
	ActionID  *string
	Payload   []byte
	CreatedAt time.Time
}

// WebhookDelivery is one message on its way to one endpoint.
type WebhookDelivery struct {
	ID            string `gorm:"primaryKey"`
	MessageID     string
	EndpointID    string
	State         string
	Attempts      int
	NextAttemptAt time.Time
	Claim         *string
	ClaimedUntil  *time.Time
	LastStatus    *int
	LastError     *string
	CreatedAt     time.Time
	UpdatedAt     time.Time
}

// WebhookAttempt is one try at sending a delivery.
type WebhookAttempt struct {
	ID              string `gorm:"primaryKey"`
	DeliveryID      string
	AttemptedAt     time.Time
	StatusCode      *int
	LatencyMs       int
	ResponseExcerpt string
	Error           *string
}
