package client

import (
	"context"
	"net/url"
	"time"

	"github.com/arbiter-ledger/arbiter/services/record"
)

// Freeze is the brake on a namespace's tools: while it is active, new keys
// of those tools wait for approval (Approval.FrozenBy) and other intents
// are answered frozen. An operator starts one, or a breaker (By.Kind
// "system", By.Name "breaker:<name>").
type Freeze = record.Freeze

// FreezeRef names a freeze that holds an action.
type FreezeRef = record.FreezeRef

// FreezeInput starts a freeze: Namespace and Reason are required; Tools
// defaults to every tool (["*"]).
type FreezeInput struct {
	Namespace string   `json:"namespace"`
	Tools     []string `json:"tools,omitempty"`
	Reason    string   `json:"reason"`
}

// FreezeFilter narrows Freezes: one namespace, only the active ones.
type FreezeFilter struct {
	Namespace string
	Active    bool
}

// Breaker starts a freeze of its tools when too many of their recent
// actions time out (MaxUnknownRatio) or fail (MaxFailureRatio), once
// MinActions have an outcome within Window seconds. State is what it
// counts now (Breaker and Breakers answer it).
type Breaker struct {
	ID              string        `json:"id"`
	Namespace       string        `json:"namespace"`
	Name            string        `json:"name"`
	Tools           []string      `json:"tools"`
	Window          int           `json:"window"`
	MinActions      int           `json:"min_actions"`
	MaxUnknownRatio *float64      `json:"max_unknown_ratio"`
	MaxFailureRatio *float64      `json:"max_failure_ratio"`
	Enabled         bool          `json:"enabled"`
	Version         int           `json:"version"`
	CreatedAt       time.Time     `json:"created_at"`
	UpdatedAt       time.Time     `json:"updated_at"`
	State           *BreakerState `json:"state,omitempty"`
}

// BreakerState is what a breaker counts now: its tools' actions with an
// outcome since Since (its window's start, or the lift of its last freeze),
// and the freeze it started while that is active.
type BreakerState struct {
	Since    time.Time `json:"since"`
	Actions  int       `json:"actions"`
	TimedOut int       `json:"timed_out"`
	Failed   int       `json:"failed"`
	Freeze   *Freeze   `json:"freeze"`
}

// BreakerInput creates a breaker (Name, Namespace, Tools and a ratio
// required) or, in UpdateBreaker, changes the fields that are set.
type BreakerInput struct {
	Name            *string   `json:"name,omitempty"`
	Namespace       *string   `json:"namespace,omitempty"`
	Tools           *[]string `json:"tools,omitempty"`
	Window          *int      `json:"window,omitempty"`
	MinActions      *int      `json:"min_actions,omitempty"`
	MaxUnknownRatio *float64  `json:"max_unknown_ratio,omitempty"`
	MaxFailureRatio *float64  `json:"max_failure_ratio,omitempty"`
	Enabled         *bool     `json:"enabled,omitempty"`
}

// StartFreeze starts a freeze (an operator key of the namespace, or an
// admin key); it holds on every replica within a second.
func (c *Client) StartFreeze(ctx context.Context, in FreezeInput) (*Freeze, error) {
	var f Freeze
	if err := c.call(ctx, "StartFreeze", "", nil, in, &f); err != nil {
		return nil, err
	}
	return &f, nil
}

// LiftFreeze lifts an active freeze, saying why; the actions only it held
// are approved and their waiting agents proceed.
func (c *Client) LiftFreeze(ctx context.Context, id, reason string) (*Freeze, error) {
	var f Freeze
	if err := c.call(ctx, "LiftFreeze", id, nil, struct {
		Reason string `json:"reason"`
	}{reason}, &f); err != nil {
		return nil, err
	}
	return &f, nil
}

// Freezes lists the freezes the key may see, newest first.
func (c *Client) Freezes(ctx context.Context, f FreezeFilter) ([]Freeze, error) {
	q := url.Values{}
	if f.Namespace != "" {
		q.Set("namespace", f.Namespace)
	}
	if f.Active {
		q.Set("active", "true")
	}
	var out struct {
		Freezes []Freeze `json:"freezes"`
	}
	if err := c.call(ctx, "Freezes", "", q, nil, &out); err != nil {
		return nil, err
	}
	return out.Freezes, nil
}

// Freeze returns one freeze.
func (c *Client) Freeze(ctx context.Context, id string) (*Freeze, error) {
	var f Freeze
	if err := c.call(ctx, "Freeze", id, nil, nil, &f); err != nil {
		return nil, err
	}
	return &f, nil
}

// CreateBreaker adds a breaker (admin key).
func (c *Client) CreateBreaker(ctx context.Context, in BreakerInput) (*Breaker, error) {
	var b Breaker
	if err := c.call(ctx, "CreateBreaker", "", nil, in, &b); err != nil {
		return nil, err
	}
	return &b, nil
}

// Breakers lists the breakers the key may see, of one namespace if set,
// each with what it counts now.
func (c *Client) Breakers(ctx context.Context, namespace string) ([]Breaker, error) {
	var q url.Values
	if namespace != "" {
		q = url.Values{"namespace": {namespace}}
	}
	var out struct {
		Breakers []Breaker `json:"breakers"`
	}
	if err := c.call(ctx, "Breakers", "", q, nil, &out); err != nil {
		return nil, err
	}
	return out.Breakers, nil
}

// Breaker returns one breaker with what it counts now.
func (c *Client) Breaker(ctx context.Context, id string) (*Breaker, error) {
	var b Breaker
	if err := c.call(ctx, "Breaker", id, nil, nil, &b); err != nil {
		return nil, err
	}
	return &b, nil
}

// UpdateBreaker changes the fields of in that are set, as a new version
// (admin key).
func (c *Client) UpdateBreaker(ctx context.Context, id string, in BreakerInput) (*Breaker, error) {
	var b Breaker
	if err := c.call(ctx, "UpdateBreaker", id, nil, in, &b); err != nil {
		return nil, err
	}
	return &b, nil
}

// DeleteBreaker stops a breaker (admin key); a freeze it started stays
// until someone lifts it.
func (c *Client) DeleteBreaker(ctx context.Context, id string) error {
	return c.call(ctx, "DeleteBreaker", id, nil, nil, nil)
}

// BreakerVersions returns every version of a breaker, oldest first.
func (c *Client) BreakerVersions(ctx context.Context, id string) ([]Breaker, error) {
	var out struct {
		Versions []Breaker `json:"versions"`
	}
	if err := c.call(ctx, "BreakerVersions", id, nil, nil, &out); err != nil {
		return nil, err
	}
	return out.Versions, nil
}
