package client

import (
	"context"
	"net/url"
	"strconv"
	"time"
)

// Webhook is an endpoint that receives alerts. Secret is set only in the
// answers to CreateWebhook and RotateWebhookSecret: store it then.
type Webhook struct {
	ID             string     `json:"id"`
	URL            string     `json:"url"`
	EventTypes     []string   `json:"event_types"`
	Namespaces     []string   `json:"namespaces"`
	Format         string     `json:"format"`
	Description    string     `json:"description"`
	Enabled        bool       `json:"enabled"`
	DisabledReason *string    `json:"disabled_reason"`
	FailingSince   *time.Time `json:"failing_since"`
	CreatedAt      time.Time  `json:"created_at"`
	UpdatedAt      time.Time  `json:"updated_at"`
	Secret         string     `json:"secret,omitempty"`
}

// WebhookInput creates an endpoint (URL and EventTypes required) or, in
// UpdateWebhook, changes the fields that are set. Fields whose zero value is
// a meaningful change (every namespace, an empty description, disabled) are
// pointers.
type WebhookInput struct {
	URL         string    `json:"url,omitempty"`
	EventTypes  []string  `json:"event_types,omitempty"`
	Namespaces  *[]string `json:"namespaces,omitempty"` // empty: every namespace
	Format      string    `json:"format,omitempty"`     // "standard" (default) or "slack"
	Description *string   `json:"description,omitempty"`
	Enabled     *bool     `json:"enabled,omitempty"`
}

// Delivery is one alert message on its way to one endpoint, with every
// attempt, oldest first.
type Delivery struct {
	ID            string            `json:"id"`
	MessageID     string            `json:"message_id"`
	WebhookID     string            `json:"webhook_id"` // the webhook-id header
	EndpointID    string            `json:"endpoint_id"`
	EventType     string            `json:"event_type"`
	ActionID      *string           `json:"action_id"`
	State         string            `json:"state"` // pending, succeeded or failed
	AttemptCount  int               `json:"attempt_count"`
	NextAttemptAt *time.Time        `json:"next_attempt_at"`
	LastStatus    *int              `json:"last_status"`
	LastError     *string           `json:"last_error"`
	CreatedAt     time.Time         `json:"created_at"`
	UpdatedAt     time.Time         `json:"updated_at"`
	Attempts      []DeliveryAttempt `json:"attempts"`
}

// DeliveryAttempt is one try at sending a delivery.
type DeliveryAttempt struct {
	AttemptedAt     time.Time `json:"attempted_at"`
	StatusCode      *int      `json:"status_code"`
	LatencyMs       int       `json:"latency_ms"`
	ResponseExcerpt string    `json:"response_excerpt"`
	Error           *string   `json:"error"`
}

// CreateWebhook adds an endpoint (admin key).
func (c *Client) CreateWebhook(ctx context.Context, in WebhookInput) (*Webhook, error) {
	var w Webhook
	if err := c.call(ctx, "CreateWebhook", "", nil, in, &w); err != nil {
		return nil, err
	}
	return &w, nil
}

// Webhooks lists the endpoints (admin key).
func (c *Client) Webhooks(ctx context.Context) ([]Webhook, error) {
	var out struct {
		Endpoints []Webhook `json:"endpoints"`
	}
	if err := c.call(ctx, "Webhooks", "", nil, nil, &out); err != nil {
		return nil, err
	}
	return out.Endpoints, nil
}

// Webhook returns one endpoint (admin key).
func (c *Client) Webhook(ctx context.Context, id string) (*Webhook, error) {
	var w Webhook
	if err := c.call(ctx, "Webhook", id, nil, nil, &w); err != nil {
		return nil, err
	}
	return &w, nil
}

// UpdateWebhook changes the fields of in that are set (admin key).
func (c *Client) UpdateWebhook(ctx context.Context, id string, in WebhookInput) (*Webhook, error) {
	var w Webhook
	if err := c.call(ctx, "UpdateWebhook", id, nil, in, &w); err != nil {
		return nil, err
	}
	return &w, nil
}

// DeleteWebhook removes an endpoint (admin key).
func (c *Client) DeleteWebhook(ctx context.Context, id string) error {
	return c.call(ctx, "DeleteWebhook", id, nil, nil, nil)
}

// RotateWebhookSecret gives the endpoint a new secret, returned in
// Webhook.Secret; the old one keeps signing for a while so receivers can
// switch over (admin key).
func (c *Client) RotateWebhookSecret(ctx context.Context, id string) (*Webhook, error) {
	var w Webhook
	if err := c.call(ctx, "RotateWebhookSecret", id, nil, nil, &w); err != nil {
		return nil, err
	}
	return &w, nil
}

// TestWebhook queues a webhook.test message to the endpoint (admin key).
func (c *Client) TestWebhook(ctx context.Context, id string) (*Delivery, error) {
	var d Delivery
	if err := c.call(ctx, "TestWebhook", id, nil, nil, &d); err != nil {
		return nil, err
	}
	return &d, nil
}

// WebhookDeliveries lists the endpoint's latest deliveries, newest first;
// limit 0 means the server's default (admin key).
func (c *Client) WebhookDeliveries(ctx context.Context, id string, limit int) ([]Delivery, error) {
	var q url.Values
	if limit != 0 {
		q = url.Values{"limit": {strconv.Itoa(limit)}}
	}
	var out struct {
		Deliveries []Delivery `json:"deliveries"`
	}
	if err := c.call(ctx, "WebhookDeliveries", id, q, nil, &out); err != nil {
		return nil, err
	}
	return out.Deliveries, nil
}

// Redeliver sends a delivery's message again, as a new delivery with the
// same webhook-id (admin key).
func (c *Client) Redeliver(ctx context.Context, deliveryID string) (*Delivery, error) {
	var d Delivery
	if err := c.call(ctx, "Redeliver", deliveryID, nil, nil, &d); err != nil {
		return nil, err
	}
	return &d, nil
}
