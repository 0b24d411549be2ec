package client

import (
	"context"
	"net/url"
	"time"
)

// Policy is an approval policy: which first intents of a namespace wait for
// people's approval before they run.
type Policy struct {
	ID                string    `json:"id"`
	Namespace         string    `json:"namespace"`
	Name              string    `json:"name"`
	Tools             []string  `json:"tools"` // patterns; * matches any run of characters
	Condition         string    `json:"condition"`
	ApprovalsRequired int       `json:"approvals_required"`
	ExpiresAfter      int       `json:"expires_after"` // seconds
	EscalateAfter     *int      `json:"escalate_after"`
	Mode              string    `json:"mode"` // ModeEnforce or ModeShadow: a shadow policy records what it would hold
	Enabled           bool      `json:"enabled"`
	Version           int       `json:"version"`
	CreatedAt         time.Time `json:"created_at"`
	UpdatedAt         time.Time `json:"updated_at"`
}

// PolicyInput creates a policy (Name, Namespace and Tools required) or, in
// UpdatePolicy, changes the fields that are set.
type PolicyInput struct {
	Name              *string   `json:"name,omitempty"`
	Namespace         *string   `json:"namespace,omitempty"`
	Tools             *[]string `json:"tools,omitempty"`
	Condition         *string   `json:"condition,omitempty"` // CEL over tool, effect, agent, namespace, reference, run_id, params
	ApprovalsRequired *int      `json:"approvals_required,omitempty"`
	ExpiresAfter      *int      `json:"expires_after,omitempty"`
	EscalateAfter     *int      `json:"escalate_after,omitempty"` // 0 on a change removes it
	Mode              *string   `json:"mode,omitempty"`
	Enabled           *bool     `json:"enabled,omitempty"`
}

// PolicyTest asks what a rule would have caught among the namespace's
// latest Limit first intents (default 1000).
type PolicyTest struct {
	Namespace string   `json:"namespace"`
	Tools     []string `json:"tools"`
	Condition string   `json:"condition,omitempty"`
	Limit     int      `json:"limit,omitempty"`
}

// PolicyTestResult is what a rule would have caught.
type PolicyTestResult struct {
	Examined int      `json:"examined"`
	Matched  int      `json:"matched"`
	Sample   []Action `json:"sample"`
	Errors   int      `json:"errors"`
}

// CreatePolicy adds a policy (admin key).
func (c *Client) CreatePolicy(ctx context.Context, in PolicyInput) (*Policy, error) {
	var p Policy
	if err := c.call(ctx, "CreatePolicy", "", nil, in, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// Policies lists the policies the key may see, of one namespace if set.
func (c *Client) Policies(ctx context.Context, namespace string) ([]Policy, error) {
	var q url.Values
	if namespace != "" {
		q = url.Values{"namespace": {namespace}}
	}
	var out struct {
		Policies []Policy `json:"policies"`
	}
	if err := c.call(ctx, "Policies", "", q, nil, &out); err != nil {
		return nil, err
	}
	return out.Policies, nil
}

// Policy returns one policy.
func (c *Client) Policy(ctx context.Context, id string) (*Policy, error) {
	var p Policy
	if err := c.call(ctx, "Policy", id, nil, nil, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// UpdatePolicy changes the fields of in that are set, as a new version
// (admin key).
func (c *Client) UpdatePolicy(ctx context.Context, id string, in PolicyInput) (*Policy, error) {
	var p Policy
	if err := c.call(ctx, "UpdatePolicy", id, nil, in, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// DeletePolicy stops a policy from applying; its versions stay readable
// (admin key).
func (c *Client) DeletePolicy(ctx context.Context, id string) error {
	return c.call(ctx, "DeletePolicy", id, nil, nil, nil)
}

// PolicyVersions returns every version of a policy, oldest first.
func (c *Client) PolicyVersions(ctx context.Context, id string) ([]Policy, error) {
	var out struct {
		Versions []Policy `json:"versions"`
	}
	if err := c.call(ctx, "PolicyVersions", id, nil, nil, &out); err != nil {
		return nil, err
	}
	return out.Versions, nil
}

// TestPolicy says what a rule would have caught; nothing is written.
func (c *Client) TestPolicy(ctx context.Context, in PolicyTest) (*PolicyTestResult, error) {
	var r PolicyTestResult
	if err := c.call(ctx, "TestPolicy", "", nil, in, &r); err != nil {
		return nil, err
	}
	return &r, nil
}
