package webhooks

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/driver"
	"github.com/arbiter-ledger/arbiter/services/record"

	"github.com/google/uuid"
	"gorm.io/gorm"

	"github.com/arbiter-ledger/arbiter/models"
)

// Webhooks manages webhook endpoints, their deliveries and test messages.
type Webhooks struct {
	st  *services.Store
	cfg Config
}

// Config is how a Webhooks service is built.
type Config struct {
	// Policy decides which addresses endpoints may have.
	Policy AddressPolicy
	// OnQueued runs after a message is written outside the ledger (a test
	// message, a redelivery): serve wakes the dispatcher with it. It must
	// not block.
	OnQueued func()
	// Now is the service's clock (secret rotation deadlines); services.Now
	// unless a test moves time.
	Now func() time.Time
}

// New returns the webhook service on st.
func New(st *services.Store, cfg Config) *Webhooks {
	if cfg.Now == nil {
		cfg.Now = services.Now
	}
	return &Webhooks{st: st, cfg: cfg}
}

// Webhook formats.
const (
	FormatStandard = "standard"
	FormatSlack    = "slack"
)

// secretOverlap is how long a rotated-out secret keeps signing.
const secretOverlap = 24 * time.Hour

// Endpoint is a webhook receiver as the API shows it. Secret is only set in
// the answers to creation and rotation.
type Endpoint struct {
	ID             string             `json:"id"`
	URL            string             `json:"url"`
	EventTypes     []record.EventType `json:"event_types"`
	Namespaces     []string           `json:"namespaces"`
	Format         string             `json:"format"`
	Description    string             `json:"description"`
	Enabled        bool               `json:"enabled"`
	DisabledReason *string            `json:"disabled_reason"`
	FailingSince   *time.Time         `json:"failing_since"`
	CreatedAt      time.Time          `json:"created_at"`
	UpdatedAt      time.Time          `json:"updated_at"`
	Secret         string             `json:"secret,omitempty"`
}

// EndpointInput creates an endpoint, or (with pointers left nil) changes
// some of its fields.
type EndpointInput struct {
	URL         *string             `json:"url,omitempty"`
	EventTypes  *[]record.EventType `json:"event_types,omitempty"`
	Namespaces  *[]string           `json:"namespaces,omitempty"`
	Format      *string             `json:"format,omitempty"`
	Description *string             `json:"description,omitempty"`
	Enabled     *bool               `json:"enabled,omitempty"`
}

func (w *Webhooks) validate(ctx context.Context, in *EndpointInput, creating bool) error {
	if creating && in.URL == nil {
		return services.Errorf(services.CodeInvalid, "field \"url\" is required")
	}
	if creating && (in.EventTypes == nil || len(*in.EventTypes) == 0) {
		return services.Errorf(services.CodeInvalid, "field \"event_types\" must list at least one of %s", services.ListOrNone(record.EventTypes))
	}
	if in.URL != nil {
		if err := w.cfg.Policy.ValidateWebhookURL(ctx, *in.URL); err != nil {
			return err
		}
	}
	if in.EventTypes != nil {
		if len(*in.EventTypes) == 0 {
			return services.Errorf(services.CodeInvalid, "field \"event_types\" must not be empty")
		}
		for _, t := range *in.EventTypes {
			if !slices.Contains(record.EventTypes, t) {
				return services.Errorf(services.CodeInvalid, "unknown event type %q: use %s", t, services.ListOrNone(record.EventTypes))
			}
		}
	}
	if in.Namespaces != nil {
		for _, ns := range *in.Namespaces {
			if err := services.ValidateNamespace(ns); err != nil {
				return err
			}
		}
	}
	if in.Format != nil && *in.Format != FormatStandard && *in.Format != FormatSlack {
		return services.Errorf(services.CodeInvalid, "unknown format %q: use standard or slack", *in.Format)
	}
	if in.Description != nil && (len(*in.Description) > 1024 || !printableText(*in.Description)) {
		return services.Errorf(services.CodeInvalid, "field \"description\" must be at most 1024 bytes of text")
	}
	return nil
}

func printableText(s string) bool {
	return services.Printable(strings.Map(func(r rune) rune {
		if r == '\n' || r == '\t' {
			return ' '
		}
		return r
	}, s))
}

func sortedUnique[T ~string](xs []T) []T {
	out := slices.Clone(xs)
	slices.Sort(out)
	return slices.Compact(out)
}

func jsonList[T ~string](xs []T) string {
	if xs == nil {
		xs = []T{}
	}
	b, _ := json.Marshal(sortedUnique(xs))
	return string(b)
}

func toEndpoint(m models.WebhookEndpoint) *Endpoint {
	e := &Endpoint{ID: m.ID, URL: m.URL, Format: m.Format, Description: m.Description, Enabled: m.Enabled,
		DisabledReason: m.DisabledReason, FailingSince: services.UTCPtr(m.FailingSince), CreatedAt: m.CreatedAt.UTC(), UpdatedAt: m.UpdatedAt.UTC()}
	_ = json.Unmarshal([]byte(m.EventTypes), &e.EventTypes)
	_ = json.Unmarshal([]byte(m.Namespaces), &e.Namespaces)
	if e.Namespaces == nil {
		e.Namespaces = []string{}
	}
	return e
}

func adminOnly(p services.Principal) error {
	if p.Role != services.RoleAdmin {
		return services.Errorf(services.CodeForbidden, "only admins manage webhook endpoints")
	}
	return nil
}

// CreateEndpoint adds an endpoint and returns it with its secret.
func (w *Webhooks) CreateEndpoint(ctx context.Context, p services.Principal, in EndpointInput) (*Endpoint, error) {
	if err := adminOnly(p); err != nil {
		return nil, err
	}
	if err := w.validate(ctx, &in, true); err != nil {
		return nil, err
	}
	now := w.cfg.Now()
	m := models.WebhookEndpoint{ID: driver.NewID(), URL: *in.URL, EventTypes: jsonList(*in.EventTypes), Namespaces: "[]",
		Format: FormatStandard, Enabled: true, Secret: newWebhookSecret(), CreatedAt: now, UpdatedAt: now}
	if in.Namespaces != nil {
		m.Namespaces = jsonList(*in.Namespaces)
	}
	if in.Format != nil {
		m.Format = *in.Format
	}
	if in.Description != nil {
		m.Description = *in.Description
	}
	if in.Enabled != nil {
		m.Enabled = *in.Enabled
	}
	if err := w.st.GormWriter().WithContext(ctx).Create(&m).Error; err != nil {
		return nil, services.DBError("webhooks: create endpoint", err)
	}
	e := toEndpoint(m)
	e.Secret = m.Secret
	return e, nil
}

func (w *Webhooks) find(ctx context.Context, id string) (models.WebhookEndpoint, error) {
	var m models.WebhookEndpoint
	if _, err := uuid.Parse(id); err != nil {
		return m, services.Errorf(services.CodeNotFound, "no webhook endpoint has id %q", id)
	}
	err := w.st.Gorm().WithContext(ctx).Where("id = ?", id).Limit(1).Find(&m).Error
	if err != nil {
		return m, services.DBError("webhooks: find endpoint", err)
	}
	if m.ID == "" {
		return m, services.Errorf(services.CodeNotFound, "no webhook endpoint has id %q", id)
	}
	return m, nil
}

// Endpoint returns one endpoint (without its secret).
func (w *Webhooks) Endpoint(ctx context.Context, p services.Principal, id string) (*Endpoint, error) {
	if err := adminOnly(p); err != nil {
		return nil, err
	}
	m, err := w.find(ctx, id)
	if err != nil {
		return nil, err
	}
	return toEndpoint(m), nil
}

// Endpoints lists every endpoint, oldest first.
func (w *Webhooks) Endpoints(ctx context.Context, p services.Principal) ([]*Endpoint, error) {
	if err := adminOnly(p); err != nil {
		return nil, err
	}
	var ms []models.WebhookEndpoint
	if err := w.st.Gorm().WithContext(ctx).Order("created_at, id").Find(&ms).Error; err != nil {
		return nil, services.DBError("webhooks: list endpoints", err)
	}
	out := make([]*Endpoint, 0, len(ms))
	for _, m := range ms {
		out = append(out, toEndpoint(m))
	}
	return out, nil
}

// UpdateEndpoint changes the given fields. Enabling an endpoint clears why it
// was disabled and its failure streak.
func (w *Webhooks) UpdateEndpoint(ctx context.Context, p services.Principal, id string, in EndpointInput) (*Endpoint, error) {
	if err := adminOnly(p); err != nil {
		return nil, err
	}
	if err := w.validate(ctx, &in, false); err != nil {
		return nil, err
	}
	m, err := w.find(ctx, id)
	if err != nil {
		return nil, err
	}
	set := map[string]any{"updated_at": w.cfg.Now()}
	if in.URL != nil {
		set["url"] = *in.URL
	}
	if in.EventTypes != nil {
		set["event_types"] = jsonList(*in.EventTypes)
	}
	if in.Namespaces != nil {
		set["namespaces"] = jsonList(*in.Namespaces)
	}
	if in.Format != nil {
		set["format"] = *in.Format
	}
	if in.Description != nil {
		set["description"] = *in.Description
	}
	if in.Enabled != nil {
		set["enabled"] = *in.Enabled
		if *in.Enabled {
			set["disabled_reason"], set["failing_since"] = nil, nil
		} else if !m.Enabled {
			// already disabled: keep the reason
		} else {
			set["disabled_reason"] = "disabled by an admin"
		}
	}
	if err := w.st.GormWriter().WithContext(ctx).Model(&models.WebhookEndpoint{}).Where("id = ?", id).Updates(set).Error; err != nil {
		return nil, services.DBError("webhooks: update endpoint", err)
	}
	return w.Endpoint(ctx, p, id)
}

// DeleteEndpoint removes an endpoint with its deliveries.
func (w *Webhooks) DeleteEndpoint(ctx context.Context, p services.Principal, id string) error {
	if err := adminOnly(p); err != nil {
		return err
	}
	if _, err := w.find(ctx, id); err != nil {
		return err
	}
	err := w.st.GormWriter().WithContext(ctx).Where("id = ?", id).Delete(&models.WebhookEndpoint{}).Error
	return services.DBErrorOrNil("webhooks: delete endpoint", err)
}

// RotateSecret gives the endpoint a new secret. The old one keeps signing
// beside it for 24 hours, so receivers can switch without losing messages.
func (w *Webhooks) RotateSecret(ctx context.Context, p services.Principal, id string) (*Endpoint, error) {
	if err := adminOnly(p); err != nil {
		return nil, err
	}
	m, err := w.find(ctx, id)
	if err != nil {
		return nil, err
	}
	now := w.cfg.Now()
	secret := newWebhookSecret()
	until := now.Add(secretOverlap)
	err = w.st.GormWriter().WithContext(ctx).Model(&models.WebhookEndpoint{}).Where("id = ?", id).Updates(map[string]any{
		"secret": secret, "previous_secret": m.Secret, "previous_secret_until": until, "updated_at": now}).Error
	if err != nil {
		return nil, services.DBError("webhooks: rotate secret", err)
	}
	e, err := w.Endpoint(ctx, p, id)
	if err != nil {
		return nil, err
	}
	e.Secret = secret
	return e, nil
}

// SendTest queues a webhook.test message for one endpoint.
func (w *Webhooks) SendTest(ctx context.Context, p services.Principal, id string) (*Delivery, error) {
	if err := adminOnly(p); err != nil {
		return nil, err
	}
	if _, err := w.find(ctx, id); err != nil {
		return nil, err
	}
	now := w.cfg.Now()
	msgID, delID := driver.NewID(), driver.NewID()
	body, _ := json.Marshal(services.MessageBody{Type: record.EventTest, Timestamp: now, Data: services.MessageData{Endpoint: &id}})
	err := w.st.GormWriter().WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Create(&models.WebhookMessage{ID: msgID, EventType: string(record.EventTest), Payload: body, CreatedAt: now}).Error; err != nil {
			return err
		}
		return tx.Create(&models.WebhookDelivery{ID: delID, MessageID: msgID, EndpointID: id, State: DeliveryPending,
			NextAttemptAt: now, CreatedAt: now, UpdatedAt: now}).Error
	})
	if err != nil {
		return nil, services.DBError("webhooks: queue test", err)
	}
	w.wake()
	return w.Delivery(ctx, p, delID)
}

func (w *Webhooks) wake() {
	if w.cfg.OnQueued != nil {
		w.cfg.OnQueued()
	}
}

// Delivery states.
const (
	DeliveryPending   = "pending"
	DeliverySucceeded = "succeeded"
	DeliveryFailed    = "failed"
)

// Delivery is one message on its way to one endpoint, with its attempts.
type Delivery struct {
	ID            string     `json:"id"`
	MessageID     string     `json:"message_id"` // the webhook-id header is "msg_" + this
	WebhookID     string     `json:"webhook_id"`
	EndpointID    string     `json:"endpoint_id"`
	EventType     string     `json:"event_type"`
	ActionID      *string    `json:"action_id"`
	State         string     `json:"state"`
	AttemptCount  int        `json:"attempt_count"`
	NextAttemptAt *time.Time `json:"next_attempt_at"`
	LastStatus    *int       `json:"last_status"`
	LastError     *string    `json:"last_error"`
	CreatedAt     time.Time  `json:"created_at"`
	UpdatedAt     time.Time  `json:"updated_at"`
	Attempts      []Attempt  `json:"attempts"`
}

// Attempt is one try at sending a delivery.
type Attempt struct {
	AttemptedAt     time.Time `json:"attempted_at"`
	StatusCode      *int      `json:"status_code"`
	LatencyMs       int       `json:"latency_ms"`
	ResponseExcerpt string    `json:"response_excerpt"`
	Error           *string   `json:"error"`
}

const deliveryColumns = `d.id, d.message_id, d.endpoint_id, m.event_type, m.action_id, d.state, d.attempts,
	d.next_attempt_at, d.last_status, d.last_error, d.created_at, d.updated_at`

func scanDelivery(row interface{ Scan(dest ...any) error }) (*Delivery, error) {
	var d Delivery
	var next time.Time
	err := row.Scan(&d.ID, &d.MessageID, &d.EndpointID, &d.EventType, &d.ActionID, &d.State, &d.AttemptCount,
		&next, &d.LastStatus, &d.LastError, &d.CreatedAt, &d.UpdatedAt)
	if err != nil {
		return nil, err
	}
	d.WebhookID = "msg_" + d.MessageID
	if d.State == DeliveryPending {
		n := next.UTC()
		d.NextAttemptAt = &n
	}
	d.CreatedAt, d.UpdatedAt = d.CreatedAt.UTC(), d.UpdatedAt.UTC()
	d.Attempts = []Attempt{}
	return &d, nil
}

func (w *Webhooks) deliveries(ctx context.Context, where string, limit int, args ...any) ([]*Delivery, error) {
	rows, err := w.st.Gorm().WithContext(ctx).Raw(`SELECT `+deliveryColumns+` FROM webhook_deliveries d
		JOIN webhook_messages m ON m.id = d.message_id WHERE `+where+` ORDER BY d.created_at DESC, d.id DESC LIMIT `+
		strconv.Itoa(limit), args...).Rows()
	if err != nil {
		return nil, services.DBError("webhooks: list deliveries", err)
	}
	var out []*Delivery
	byID := map[string]*Delivery{}
	for rows.Next() {
		d, err := scanDelivery(rows)
		if err != nil {
			rows.Close()
			return nil, services.DBError("webhooks: list deliveries", err)
		}
		out = append(out, d)
		byID[d.ID] = d
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, services.DBError("webhooks: list deliveries", err)
	}
	if len(out) == 0 {
		return []*Delivery{}, nil
	}
	ids := make([]string, 0, len(out))
	for _, d := range out {
		ids = append(ids, d.ID)
	}
	var attempts []models.WebhookAttempt
	if err := w.st.Gorm().WithContext(ctx).Where("delivery_id IN ?", ids).Order("attempted_at, id").Find(&attempts).Error; err != nil {
		return nil, services.DBError("webhooks: list attempts", err)
	}
	for _, a := range attempts {
		d := byID[a.DeliveryID]
		d.Attempts = append(d.Attempts, Attempt{AttemptedAt: a.AttemptedAt.UTC(), StatusCode: a.StatusCode,
			LatencyMs: a.LatencyMs, ResponseExcerpt: a.ResponseExcerpt, Error: a.Error})
	}
	return out, nil
}

// EndpointDeliveries lists an endpoint's newest deliveries with their
// attempts.
func (w *Webhooks) EndpointDeliveries(ctx context.Context, p services.Principal, endpointID string, limit int) ([]*Delivery, error) {
	if err := adminOnly(p); err != nil {
		return nil, err
	}
	if _, err := w.find(ctx, endpointID); err != nil {
		return nil, err
	}
	return w.deliveries(ctx, "d.endpoint_id = ?", clampLimit(limit), endpointID)
}

// ActionDeliveries lists the deliveries an action's changes caused, for
// anyone who may see the action.
func (w *Webhooks) ActionDeliveries(ctx context.Context, p services.Principal, a *record.Action) ([]*Delivery, error) {
	if !p.Sees(a.Namespace) {
		return nil, services.Errorf(services.CodeNotFound, "no action has id %q", a.ID)
	}
	return w.deliveries(ctx, "m.action_id = ?", 200, a.ID)
}

// Delivery returns one delivery with its attempts.
func (w *Webhooks) Delivery(ctx context.Context, p services.Principal, id string) (*Delivery, error) {
	if err := adminOnly(p); err != nil {
		return nil, err
	}
	if _, err := uuid.Parse(id); err != nil {
		return nil, services.Errorf(services.CodeNotFound, "no delivery has id %q", id)
	}
	ds, err := w.deliveries(ctx, "d.id = ?", 1, id)
	if err != nil {
		return nil, err
	}
	if len(ds) == 0 {
		return nil, services.Errorf(services.CodeNotFound, "no delivery has id %q", id)
	}
	return ds[0], nil
}

// Redeliver sends a delivery's message to its endpoint again, as a new
// delivery with the same webhook-id, whatever became of the old one.
func (w *Webhooks) Redeliver(ctx context.Context, p services.Principal, id string) (*Delivery, error) {
	old, err := w.Delivery(ctx, p, id)
	if err != nil {
		return nil, err
	}
	now := w.cfg.Now()
	d := models.WebhookDelivery{ID: driver.NewID(), MessageID: old.MessageID, EndpointID: old.EndpointID, State: DeliveryPending,
		NextAttemptAt: now, CreatedAt: now, UpdatedAt: now}
	if err := w.st.GormWriter().WithContext(ctx).Create(&d).Error; err != nil {
		return nil, services.DBError("webhooks: redeliver", err)
	}
	w.wake()
	return w.Delivery(ctx, p, d.ID)
}

func clampLimit(n int) int {
	if n <= 0 || n > 500 {
		return 100
	}
	return n
}
