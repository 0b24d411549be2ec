package client

import (
	"context"
	"net/url"
	"time"

	"github.com/arbiter-ledger/arbiter/services/record"
)

// Limit keeps a budget across actions: it charges the first intents it
// matches an amount in their business group, and holds or denies an intent
// that would take its group's use within a sliding window over Max.
type Limit struct {
	ID                string    `json:"id"`
	Namespace         string    `json:"namespace"`
	Name              string    `json:"name"`
	Tools             []string  `json:"tools"` // patterns; * matches any run of characters
	Condition         string    `json:"condition"`
	Amount            string    `json:"amount"`   // CEL, an int or a double; empty counts actions
	GroupBy           string    `json:"group_by"` // CEL, a string; empty is one group for the namespace
	Window            int       `json:"window"`   // seconds
	Max               float64   `json:"max"`
	Over              string    `json:"over"` // LimitHold or LimitDeny
	ApprovalsRequired int       `json:"approvals_required"`
	Mode              string    `json:"mode"` // ModeEnforce or ModeShadow
	Enabled           bool      `json:"enabled"`
	Version           int       `json:"version"`
	CreatedAt         time.Time `json:"created_at"`
	UpdatedAt         time.Time `json:"updated_at"`
}

// What a limit does to an intent over its max, and how limits and policies
// apply: a shadow one records what it would have done and enforces nothing.
const (
	LimitHold   = record.LimitHold
	LimitDeny   = record.LimitDeny
	ModeEnforce = record.LimitEnforce
	ModeShadow  = record.LimitShadow
)

// LimitInput creates a limit (Name, Namespace, Tools, Window and Max
// required) or, in UpdateLimit, changes the fields that are set.
type LimitInput struct {
	Name              *string   `json:"name,omitempty"`
	Namespace         *string   `json:"namespace,omitempty"`
	Tools             *[]string `json:"tools,omitempty"`
	Condition         *string   `json:"condition,omitempty"`
	Amount            *string   `json:"amount,omitempty"`
	GroupBy           *string   `json:"group_by,omitempty"`
	Window            *int      `json:"window,omitempty"`
	Max               *float64  `json:"max,omitempty"`
	Over              *string   `json:"over,omitempty"`
	ApprovalsRequired *int      `json:"approvals_required,omitempty"`
	Mode              *string   `json:"mode,omitempty"`
	Enabled           *bool     `json:"enabled,omitempty"`
}

// LimitCharge is what one limit charged an action (Action.Limits).
type LimitCharge = record.LimitCharge

// ApprovalLimit is a limit that holds an action for approval, with its
// group's use when the intent came (Approval.Limits).
type ApprovalLimit = record.ApprovalLimit

// LimitUsage is a limit's counted use now: the groups with the most use.
type LimitUsage struct {
	Window int          `json:"window"`
	Max    float64      `json:"max"`
	Groups []GroupUsage `json:"groups"`
}

// GroupUsage is one group's counted use and the oldest charge counting.
type GroupUsage struct {
	Group    string    `json:"group"`
	Used     float64   `json:"used"`
	Actions  int       `json:"actions"`
	OldestAt time.Time `json:"oldest_at"`
}

// CreateLimit adds a limit (admin key).
func (c *Client) CreateLimit(ctx context.Context, in LimitInput) (*Limit, error) {
	var l Limit
	if err := c.call(ctx, "CreateLimit", "", nil, in, &l); err != nil {
		return nil, err
	}
	return &l, nil
}

// Limits lists the limits the key may see, of one namespace if set.
func (c *Client) Limits(ctx context.Context, namespace string) ([]Limit, error) {
	var q url.Values
	if namespace != "" {
		q = url.Values{"namespace": {namespace}}
	}
	var out struct {
		Limits []Limit `json:"limits"`
	}
	if err := c.call(ctx, "Limits", "", q, nil, &out); err != nil {
		return nil, err
	}
	return out.Limits, nil
}

// Limit returns one limit.
func (c *Client) Limit(ctx context.Context, id string) (*Limit, error) {
	var l Limit
	if err := c.call(ctx, "Limit", id, nil, nil, &l); err != nil {
		return nil, err
	}
	return &l, nil
}

// UpdateLimit changes the fields of in that are set, as a new version
// (admin key). Charges already made stay as they were.
func (c *Client) UpdateLimit(ctx context.Context, id string, in LimitInput) (*Limit, error) {
	var l Limit
	if err := c.call(ctx, "UpdateLimit", id, nil, in, &l); err != nil {
		return nil, err
	}
	return &l, nil
}

// DeleteLimit stops a limit from applying; its versions stay readable
// (admin key).
func (c *Client) DeleteLimit(ctx context.Context, id string) error {
	return c.call(ctx, "DeleteLimit", id, nil, nil, nil)
}

// LimitVersions returns every version of a limit, oldest first.
func (c *Client) LimitVersions(ctx context.Context, id string) ([]Limit, error) {
	var out struct {
		Versions []Limit `json:"versions"`
	}
	if err := c.call(ctx, "LimitVersions", id, nil, nil, &out); err != nil {
		return nil, err
	}
	return out.Versions, nil
}

// LimitUsage returns a limit's counted use now: the 100 groups with the
// most, or only group if set.
func (c *Client) LimitUsage(ctx context.Context, id, group string) (*LimitUsage, error) {
	var q url.Values
	if group != "" {
		q = url.Values{"group": {group}}
	}
	var u LimitUsage
	if err := c.call(ctx, "LimitUsage", id, q, nil, &u); err != nil {
		return nil, err
	}
	return &u, nil
}
