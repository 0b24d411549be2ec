package client

import (
	"context"
	"time"
)

// BulkFilter selects the actions of a bulk decision. Every criterion set
// must hold; at least one must be set.
type BulkFilter struct {
	IDs       []string   `json:"ids,omitempty"`
	Status    []string   `json:"status,omitempty"`
	Tool      string     `json:"tool,omitempty"`
	Agent     string     `json:"agent,omitempty"`
	Namespace string     `json:"namespace,omitempty"`
	Since     *time.Time `json:"since,omitempty"` // created at or after
	Until     *time.Time `json:"until,omitempty"` // created before
}

// BulkDecision is one decision on the actions Filter selects. Unless
// DryRun, Reason (except to approve) and MaxCount are required: if the
// decision is allowed on more than MaxCount actions, nothing is written
// and the error's code is too_many_matched.
type BulkDecision struct {
	Filter                   BulkFilter `json:"filter"`
	Decision                 string     `json:"decision"`
	Reason                   string     `json:"reason,omitempty"`
	AcknowledgeDuplicateRisk bool       `json:"acknowledge_duplicate_risk,omitempty"`
	DryRun                   bool       `json:"dry_run,omitempty"`
	MaxCount                 int        `json:"max_count,omitempty"`
}

// BulkResult answers a bulk decision. A dry run sets Matched, Allowed and
// Sample; an applied one sets Applied and Skipped.
type BulkResult struct {
	Matched int      `json:"matched"`
	Allowed int      `json:"allowed"`
	Sample  []Action `json:"sample,omitempty"`
	Applied int      `json:"applied"`
	// Skipped are the matched actions not decided, with the code a single
	// decision would have got (invalid_transition, version_conflict, …),
	// and ids that name no action the key can see (not_found).
	Skipped []BulkSkip `json:"skipped,omitempty"`
}

// BulkSkip is an action a bulk decision did not decide, and why.
type BulkSkip struct {
	ID   string `json:"id"`
	Code string `json:"code"`
}

// DecideMany takes one decision on many actions (an operator key in its
// namespace, or an admin key), each decided as if alone, or with DryRun
// counts what it would decide.
func (c *Client) DecideMany(ctx context.Context, d BulkDecision) (*BulkResult, error) {
	var r BulkResult
	if err := c.call(ctx, "DecideMany", "", nil, d, &r); err != nil {
		return nil, err
	}
	return &r, nil
}
