package client

import (
	"context"
	"encoding/json"
	"iter"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// ListOptions filter a list of actions. Zero fields match everything.
type ListOptions struct {
	Status    []Status
	Tool      string
	Agent     string
	Since     time.Time // created at or after
	Until     time.Time // created before
	Q         string    // a key or a reference, exactly
	Namespace string    // for admin keys; other keys see their own namespace only
	Limit     int       // 1–500, default 50
	Cursor    string    // ActionPage.NextCursor of the previous page
}

func (o ListOptions) query() url.Values {
	q := url.Values{}
	if len(o.Status) > 0 {
		s := make([]string, len(o.Status))
		for i, st := range o.Status {
			s[i] = string(st)
		}
		q.Set("status", strings.Join(s, ","))
	}
	set := func(k, v string) {
		if v != "" {
			q.Set(k, v)
		}
	}
	set("tool", o.Tool)
	set("agent", o.Agent)
	set("q", o.Q)
	set("namespace", o.Namespace)
	set("cursor", o.Cursor)
	if !o.Since.IsZero() {
		q.Set("since", o.Since.UTC().Format(time.RFC3339Nano))
	}
	if !o.Until.IsZero() {
		q.Set("until", o.Until.UTC().Format(time.RFC3339Nano))
	}
	if o.Limit != 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	return q
}

// ActionPage is one page of actions, newest first.
type ActionPage struct {
	Actions []Action `json:"actions"`
	// NextCursor fetches the next page; empty on the last one.
	NextCursor string `json:"next_cursor"`
}

// Decision is an operator's resolution of an action. Reason is required.
type Decision struct {
	Decision string `json:"decision"` // DecisionConfirm, DecisionRetry, …
	Reason   string `json:"reason"`
	// ExpectedVersion refuses the decision (409 version_conflict) if the
	// action changed since the version the operator looked at.
	ExpectedVersion *int `json:"expected_version,omitempty"`
	// AcknowledgeDuplicateRisk is required to retry an unkeyed action.
	AcknowledgeDuplicateRisk bool `json:"acknowledge_duplicate_risk,omitempty"`
	// Evidence for confirm decisions.
	ExternalRef *string         `json:"external_ref,omitempty"`
	Result      json.RawMessage `json:"result,omitempty"`
}

// DecisionResult is the action after a decision and the entry recording it.
type DecisionResult struct {
	Action *Action      `json:"action"`
	Entry  *LedgerEntry `json:"entry"`
}

// Action returns the action with the given id.
func (c *Client) Action(ctx context.Context, id string) (*Action, error) {
	var a Action
	if err := c.call(ctx, "Action", id, nil, nil, &a); err != nil {
		return nil, err
	}
	return &a, nil
}

// ActionByKey returns the action for key in the key's own namespace.
func (c *Client) ActionByKey(ctx context.Context, key string) (*Action, error) {
	var a Action
	if err := c.call(ctx, "ActionByKey", "", url.Values{"key": {key}}, nil, &a); err != nil {
		return nil, err
	}
	return &a, nil
}

// ActionByKeyIn returns the action for key in namespace (admin keys see
// every namespace and must name one).
func (c *Client) ActionByKeyIn(ctx context.Context, namespace, key string) (*Action, error) {
	var a Action
	if err := c.call(ctx, "ActionByKeyIn", "", url.Values{"key": {key}, "namespace": {namespace}}, nil, &a); err != nil {
		return nil, err
	}
	return &a, nil
}

// ListActions returns one page of actions matching o, newest first.
func (c *Client) ListActions(ctx context.Context, o ListOptions) (*ActionPage, error) {
	var p ActionPage
	if err := c.call(ctx, "ListActions", "", o.query(), nil, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// EntriesOptions select one page of a timeline.
type EntriesOptions struct {
	Limit  int    // 1–1000, default 1000
	Cursor string // EntryPage.NextCursor of the previous page
}

// EntryPage is one page of a timeline, oldest first. A page holds at most
// its limit of entries and about 4 MiB.
type EntryPage struct {
	Entries []LedgerEntry `json:"entries"`
	// NextCursor fetches the next page; empty on the last one.
	NextCursor string `json:"next_cursor"`
}

// EntriesPage returns one page of the timeline of the action with the
// given id, oldest first.
func (c *Client) EntriesPage(ctx context.Context, id string, o EntriesOptions) (*EntryPage, error) {
	q := url.Values{}
	if o.Limit != 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	if o.Cursor != "" {
		q.Set("cursor", o.Cursor)
	}
	var p EntryPage
	if err := c.call(ctx, "EntriesPage", id, q, nil, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// Entries returns the whole timeline of the action with the given id,
// oldest first, reading it page by page.
func (c *Client) Entries(ctx context.Context, id string) ([]LedgerEntry, error) {
	var all []LedgerEntry
	for e, err := range c.AllEntries(ctx, id, EntriesOptions{}) {
		if err != nil {
			return nil, err
		}
		all = append(all, e)
	}
	return all, nil
}

// AllEntries iterates over the timeline of the action with the given id,
// oldest first, from o.Cursor (the start when empty) in pages of o.Limit,
// fetching the next page as the loop reaches it. An error ends the
// iteration as its last value.
func (c *Client) AllEntries(ctx context.Context, id string, o EntriesOptions) iter.Seq2[LedgerEntry, error] {
	return func(yield func(LedgerEntry, error) bool) {
		for {
			p, err := c.EntriesPage(ctx, id, o)
			if err != nil {
				yield(LedgerEntry{}, err)
				return
			}
			for _, e := range p.Entries {
				if !yield(e, nil) {
					return
				}
			}
			if p.NextCursor == "" || p.NextCursor == o.Cursor {
				return
			}
			o.Cursor = p.NextCursor
		}
	}
}

// Decide takes an operator decision on the action with the given id (an
// operator or admin key).
func (c *Client) Decide(ctx context.Context, id string, d Decision) (*DecisionResult, error) {
	var r DecisionResult
	if err := c.call(ctx, "Decide", id, nil, d, &r); err != nil {
		return nil, err
	}
	return &r, nil
}
