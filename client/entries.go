package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// Entry is one ledger entry as an agent sends it. Optional fields are
// pointers so that an absent field is not confused with a zero value
// ([Ptr] helps). Which fields an entry type takes is in the OpenAPI
// document; unknown combinations are answered rejected / invalid.
type Entry struct {
	Key  string `json:"key"`
	Type string `json:"type"`
	// For intents.
	Tool      *string         `json:"tool,omitempty"`
	Effect    *string         `json:"effect,omitempty"`
	Params    json.RawMessage `json:"params,omitempty"`
	Timeout   *float64        `json:"timeout,omitempty"` // lease in seconds (intents, heartbeats and lookups)
	Reference *string         `json:"reference,omitempty"`
	// RequireApproval holds a first intent until a person approves it.
	RequireApproval *bool `json:"require_approval,omitempty"`
	// KeyTTL is how long the downstream honours the key, in seconds from
	// the action's creation: after it a keyed action counts as unkeyed.
	KeyTTL *float64 `json:"key_ttl,omitempty"`
	// For every type.
	Agent      *string    `json:"agent,omitempty"`
	RunID      *string    `json:"run_id,omitempty"`
	OccurredAt *time.Time `json:"occurred_at,omitempty"`
	// For heartbeats, outcomes and lookups: the attempt they belong to.
	Attempt     *int            `json:"attempt,omitempty"`
	Result      json.RawMessage `json:"result,omitempty"`
	ExternalRef *string         `json:"external_ref,omitempty"`
	Error       *string         `json:"error,omitempty"`
	Retriable   *bool           `json:"retriable,omitempty"`
	Message     *string         `json:"message,omitempty"`
	// For lookup results: what the lookup found, and what the downstream
	// said (any JSON, at most 64 KiB). ExternalRef and Result apply too.
	Answer   *Answer         `json:"answer,omitempty"`
	Evidence json.RawMessage `json:"evidence,omitempty"`
}

// Result is the ledger's answer to one entry.
type Result struct {
	Key        string     `json:"key"`
	Type       string     `json:"type"`
	Outcome    string     `json:"outcome"`
	Attempt    *int       `json:"attempt"`
	LeaseUntil *time.Time `json:"lease_until"`
	Action     *Action    `json:"action"`
	// Error is set when Outcome is rejected.
	Error *Error `json:"error"`
}

// Err returns the result's error when the entry was rejected, else nil.
func (r *Result) Err() error {
	if r.Outcome != OutcomeRejected {
		return nil
	}
	if r.Error == nil {
		return &Error{Code: "unexpected_answer", Message: "entry rejected without an error"}
	}
	return r.Error
}

// AttemptNumber is the attempt the result names, or 0.
func (r *Result) AttemptNumber() int {
	if r.Attempt == nil {
		return 0
	}
	return *r.Attempt
}

// Submit sends one entry. Every outcome but rejected is a Result with a nil
// error, whatever the HTTP status (in_progress and held are answered 409).
// A rejected entry returns the Result (whose Action, if any, is the stored
// one) and its *Error; a request that failed returns the error alone.
func (c *Client) Submit(ctx context.Context, e Entry) (*Result, error) {
	status, body, err := c.send(ctx, "Submit", "", nil, e)
	if err != nil {
		return nil, err
	}
	return entryResult(status, body)
}

// MaxApprovalWait is the longest one request may wait for a decision.
const MaxApprovalWait = 60 * time.Second

// SubmitWait sends one intent and, if it is held for approval, asks the
// server to hold the answer until the action is approved (proceed) or
// denied (denied), for up to wait (at most MaxApprovalWait). Any other
// answer comes at once, as from Submit.
func (c *Client) SubmitWait(ctx context.Context, e Entry, wait time.Duration) (*Result, error) {
	wait = min(max(wait, 0), MaxApprovalWait)
	h := http.Header{"Prefer": {fmt.Sprintf("wait=%d", int(wait.Seconds()))}}
	timeout := c.timeout
	if timeout > 0 {
		timeout += wait
	}
	status, body, err := c.sendWith(ctx, "SubmitWait", "", nil, e, h, timeout)
	if err != nil {
		return nil, err
	}
	return entryResult(status, body)
}

// entryResult reads the answer to one entry.
func entryResult(status int, body []byte) (*Result, error) {
	var r Result
	if json.Unmarshal(body, &r) != nil || r.Outcome == "" {
		// Not an entry result: the request itself failed (401, 413, 503, …).
		return nil, answerError(status, body)
	}
	if r.Outcome == OutcomeRejected {
		if r.Error == nil {
			r.Error = &Error{Code: "unexpected_answer", Message: "entry rejected without an error"}
		}
		r.Error.StatusCode = status
		return &r, r.Error
	}
	return &r, nil
}

// SubmitBatch sends 1–500 entries in one request; they are applied in
// order and answered one Result each, in the same order. A rejected entry
// does not affect the others and is not an error here: check each
// Result.Err. The error is for the request as a whole.
func (c *Client) SubmitBatch(ctx context.Context, entries []Entry) ([]Result, error) {
	var out struct {
		Results []Result `json:"results"`
	}
	if err := c.call(ctx, "SubmitBatch", "", nil, struct {
		Entries []Entry `json:"entries"`
	}{entries}, &out); err != nil {
		return nil, err
	}
	if len(out.Results) != len(entries) {
		return out.Results, fmt.Errorf("arbiter: %d results for %d entries", len(out.Results), len(entries))
	}
	return out.Results, nil
}
