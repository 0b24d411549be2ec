package services

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/arbiter-ledger/arbiter/services/driver"
	"github.com/arbiter-ledger/arbiter/services/record"
)

// Bulk decisions (SPEC "Bulk decisions"): one decision taken on the actions
// a filter selects. Each action is decided as if alone, by the rules
// table's row for the decision and its status, into its own change (its
// decision entry and its action.decided alert) conditional on the version
// read: its own compare-and-set. The changes of one request are written as
// one set through write, which is one statement on PostgreSQL and one
// transaction on SQLite (docs/benchmarks.md, "Bulk decisions", has what
// that saves over one write per action). A change that lost a race to
// another writer is skipped as version_conflict and never decided again,
// exactly as the loser of two single decisions is.

const (
	// MaxBulkActions is the most actions one request decides, and the
	// ceiling of max_count.
	MaxBulkActions = 1000
	// MaxBulkExamined bounds the actions a filter may match: a request
	// reads at most this many, and refuses a filter that matches more.
	MaxBulkExamined = 10000
	// BulkSampleSize is how many of the actions a dry run would decide it
	// shows.
	BulkSampleSize = 20
	// bulkPage is how many matching actions one read of a filter takes.
	bulkPage = 1000
)

// BulkFilter selects the actions of a bulk decision. Every criterion given
// must hold; at least one must be given.
type BulkFilter struct {
	IDs       []string        `json:"ids,omitempty"`
	Status    []record.Status `json:"status,omitempty"`
	Tool      string          `json:"tool,omitempty"`
	Agent     string          `json:"agent,omitempty"`
	Namespace string          `json:"namespace,omitempty"`
	Since     *time.Time      `json:"since,omitempty"` // created at or after
	Until     *time.Time      `json:"until,omitempty"` // created before
	// Search is an exact key or reference, as the dashboard's action list
	// filters by; the API does not take it.
	Search string `json:"-"`
}

// BulkInput is a bulk decision request.
type BulkInput struct {
	Filter                   *BulkFilter     `json:"filter"`
	Decision                 record.Decision `json:"decision"`
	Reason                   string          `json:"reason"`
	AcknowledgeDuplicateRisk bool            `json:"acknowledge_duplicate_risk,omitempty"`
	DryRun                   bool            `json:"dry_run,omitempty"`
	MaxCount                 *int            `json:"max_count,omitempty"`
}

// BulkPreview answers a dry run: how many actions the filter matched, on how
// many the decision is allowed now, and up to BulkSampleSize of those.
type BulkPreview struct {
	Matched int              `json:"matched"`
	Allowed int              `json:"allowed"`
	Sample  []*record.Action `json:"sample"`
	// Skipped are the matched actions the decision would not apply to, and
	// why; the dashboard shows them before the operator confirms.
	Skipped []BulkSkip `json:"-"`
}

// BulkSkip is an action a bulk decision did not decide, with the code a
// single decision on it would have been refused with: invalid_transition,
// duplicate_risk_unacknowledged, already_approved; version_conflict when it
// changed between the read and the write; not_found for an id in
// filter.ids that names no action the caller can see.
type BulkSkip struct {
	ID   string `json:"id"`
	Code string `json:"code"`
}

// BulkResult answers a bulk decision that was applied.
type BulkResult struct {
	Applied int        `json:"applied"`
	Skipped []BulkSkip `json:"skipped"`
}

// BulkAnswer is a dry run's preview or an applied decision's result.
type BulkAnswer struct {
	Preview *BulkPreview
	Result  *BulkResult
}

// MarshalJSON encodes whichever of the two answers is set.
func (a *BulkAnswer) MarshalJSON() ([]byte, error) {
	if a.Preview != nil {
		return json.Marshal(a.Preview)
	}
	return json.Marshal(a.Result)
}

// DecodeBulkInput decodes a bulk decision request strictly: unknown or
// repeated fields, at the top level and in the filter, are invalid.
func DecodeBulkInput(body []byte) (BulkInput, error) {
	var in BulkInput
	if err := decodeStrictly(body, &in); err != nil {
		return in, err
	}
	return in, nil
}

// UnmarshalJSON holds the filter's names to its own fields, as CheckFields
// does for the request.
func (f *BulkFilter) UnmarshalJSON(raw []byte) error {
	type plain BulkFilter
	var p plain
	if err := decodeStrictly(raw, &p); err != nil {
		if e, ok := AsError(err); ok && (strings.HasPrefix(e.Message, "unknown field") || strings.HasPrefix(e.Message, "field ")) {
			e.Message = "filter: " + e.Message
		}
		return err
	}
	*f = BulkFilter(p)
	return nil
}

// decodeStrictly is DecodeStrict, naming the filter's time fields when one
// is not a time.
func decodeStrictly(raw []byte, v any) error {
	return decodeStrictWith(raw, v, func(err error) *Error {
		var pe *time.ParseError
		if errors.As(err, &pe) || strings.HasPrefix(err.Error(), "Time.UnmarshalJSON") {
			return Errorf(CodeInvalid, "fields \"since\" and \"until\" must be RFC 3339 times in strings, such as \"2026-11-30T10:00:00Z\"")
		}
		return DescribeJSONError(err)
	})
}

// empty reports whether f names no criterion.
func (f *BulkFilter) empty() bool {
	return f == nil || (len(f.IDs) == 0 && len(f.Status) == 0 && f.Tool == "" && f.Agent == "" && f.Namespace == "" &&
		f.Since == nil && f.Until == nil && f.Search == "")
}

// holds reports whether a matches every criterion of f but ids and
// namespace, which the read applies.
func (f *BulkFilter) holds(a *record.Action) bool {
	switch {
	case len(f.Status) > 0 && !slices.Contains(f.Status, a.Status),
		f.Tool != "" && a.Tool != f.Tool,
		f.Agent != "" && (a.Agent == nil || *a.Agent != f.Agent),
		f.Since != nil && a.CreatedAt.Before(*f.Since),
		f.Until != nil && !a.CreatedAt.Before(*f.Until),
		f.Search != "" && a.Key != f.Search && (a.Reference == nil || *a.Reference != f.Search):
		return false
	}
	return true
}

// bulkScope is where a bulk request reads: one namespace, or those among
// (a person's memberships as operator), or, both empty, every namespace.
type bulkScope struct {
	ns    string
	among []string
}

// validate checks a bulk request's fields and returns the decision each
// action gets and where the request reads: the namespaces the principal
// decides in.
func (in *BulkInput) validate(p Principal) (DecisionInput, bulkScope, error) {
	d := DecisionInput{Decision: in.Decision, Reason: in.Reason, AcknowledgeDuplicateRisk: in.AcknowledgeDuplicateRisk}
	f := in.Filter
	if f.empty() {
		return d, bulkScope{}, Errorf(CodeInvalid, "field \"filter\" is required and must name at least one criterion "+
			"(ids, status, tool, agent, namespace, since or until): a bulk decision never applies to everything")
	}
	if len(f.IDs) > MaxBulkActions {
		return d, bulkScope{}, Errorf(CodeInvalid, "filter.ids lists %d actions; at most %d per request", len(f.IDs), MaxBulkActions)
	}
	for i, id := range f.IDs {
		if _, err := uuid.Parse(id); err != nil {
			return d, bulkScope{}, Errorf(CodeInvalid, "filter.ids[%d] %q is not an action id", i, id)
		}
	}
	if len(f.Status) > MaxFilterValues {
		return d, bulkScope{}, Errorf(CodeInvalid, "filter.status lists %d statuses; at most %d per request", len(f.Status), MaxFilterValues)
	}
	for _, s := range f.Status {
		if !s.Valid() {
			return d, bulkScope{}, Errorf(CodeInvalid, "filter.status: unknown status %q: use one of %s", s, ListOrNone(record.Statuses))
		}
	}
	if f.Since != nil && f.Until != nil && !f.Since.Before(*f.Until) {
		return d, bulkScope{}, Errorf(CodeInvalid, "filter.since must be before filter.until")
	}
	// Text PostgreSQL cannot compare (a NUL, invalid UTF-8) is refused on
	// both databases rather than failing the read.
	for _, t := range [...]struct{ name, v string }{{"filter.tool", f.Tool}, {"filter.agent", f.Agent}, {"search", f.Search}} {
		if err := CheckFilterText(t.name, t.v); err != nil {
			return d, bulkScope{}, err
		}
	}
	if f.Namespace != "" {
		if err := ValidateNamespace(f.Namespace); err != nil {
			return d, bulkScope{}, err
		}
	}
	check := d
	if in.DryRun && strings.TrimSpace(check.Reason) == "" {
		check.Reason = "dry run" // a dry run needs no reason; one given is checked
	}
	if err := check.Validate(); err != nil {
		return d, bulkScope{}, err
	}
	switch {
	case in.MaxCount == nil && !in.DryRun:
		return d, bulkScope{}, Errorf(CodeInvalid, "field \"max_count\" is required: the most actions you expect this to decide "+
			"(1 to %d); if more are allowed, nothing is written (send dry_run: true to count them first)", MaxBulkActions)
	case in.MaxCount != nil && (*in.MaxCount < 1 || *in.MaxCount > MaxBulkActions):
		return d, bulkScope{}, Errorf(CodeInvalid, "field \"max_count\" must be between 1 and %d: at most %d actions per request",
			MaxBulkActions, MaxBulkActions)
	}
	// A key decides in its own namespace only, a person where they are an
	// operator; any other is not found, whether or not it exists.
	sc := bulkScope{}
	var none bool
	if sc.ns, sc.among, none = p.DecisionScope(f.Namespace); none {
		if f.Namespace == "" {
			return d, sc, Errorf(CodeForbidden, "you may not take decisions in any namespace")
		}
		return d, sc, Errorf(CodeNotFound, "no namespace %q among those you may decide in", f.Namespace)
	}
	return d, sc, nil
}

// DecideMany takes one decision on every action in.Filter selects that the
// decision is allowed on, each as if alone (see the top of this file). A dry
// run counts and writes nothing. Otherwise, if the decision is allowed on
// more than in.MaxCount actions, nothing is written and the answer is
// too_many_matched.
func (l *Ledger) DecideMany(ctx context.Context, p Principal, in BulkInput) (*BulkAnswer, error) {
	if !p.CanDecide() {
		return nil, Errorf(CodeForbidden, "the %s role may not take decisions; use an operator key", p.Role)
	}
	d, ns, err := in.validate(p)
	if err != nil {
		return nil, err
	}
	if err := mayApprove(p, d); err != nil {
		return nil, err
	}
	matched, missing, err := l.bulkMatch(ctx, in.Filter, ns)
	if err != nil {
		return nil, err
	}
	if d.Decision == record.DecisionAcknowledge {
		if err := l.markReview(ctx, matched...); err != nil {
			return nil, err
		}
	}
	b := l.planMany(p, matched, d, !in.DryRun)
	if in.DryRun {
		pv := &BulkPreview{Matched: len(matched), Allowed: len(b.allowed), Sample: make([]*record.Action, 0, BulkSampleSize),
			Skipped: b.skipped}
		pv.Sample = append(pv.Sample, b.allowed[:min(len(b.allowed), BulkSampleSize)]...)
		return &BulkAnswer{Preview: pv}, nil
	}
	if len(b.allowed) > *in.MaxCount {
		return nil, Errorf(CodeTooManyMatched, "the decision %s is allowed on %d of the %d actions matched, more than max_count %d; "+
			"nothing was written: narrow the filter or raise max_count (at most %d)",
			d.Decision, len(b.allowed), len(matched), *in.MaxCount, MaxBulkActions)
	}
	res, err := l.writeMany(ctx, b)
	if err != nil {
		return nil, err
	}
	for _, id := range missing {
		res.Skipped = append(res.Skipped, BulkSkip{ID: id, Code: CodeNotFound})
	}
	return &BulkAnswer{Result: res}, nil
}

// bulkMatch reads the actions f selects where sc says, newest first. With
// ids, it also returns those that name no action the caller decides on.
func (l *Ledger) bulkMatch(ctx context.Context, f *BulkFilter, sc bulkScope) ([]*record.Action, []string, error) {
	if len(f.IDs) > 0 {
		ids := make([]string, 0, len(f.IDs))
		seen := make(map[string]bool, len(f.IDs))
		for _, raw := range f.IDs {
			id := uuid.MustParse(raw).String() // validate checked it; the stored form
			if !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
		}
		found, err := l.st.ex.ActionList(ctx, &driver.ActionListParams{Namespace: sc.ns, Namespaces: sc.among, IDs: ids, Limit: len(ids)})
		if err != nil {
			return nil, nil, DBError("ledger: read actions by id", err)
		}
		var matched []*record.Action
		for _, a := range found {
			delete(seen, a.ID)
			if f.holds(a) {
				matched = append(matched, a)
			}
		}
		var missing []string
		for _, id := range ids {
			if seen[id] {
				missing = append(missing, id)
			}
		}
		return matched, missing, nil
	}
	q := &driver.ActionListParams{Namespace: sc.ns, Namespaces: sc.among, Statuses: f.Status, Tool: f.Tool, Agent: f.Agent, Since: f.Since,
		Until: f.Until, Search: f.Search, Limit: bulkPage}
	var matched []*record.Action
	for {
		page, err := l.st.ex.ActionList(ctx, q)
		if err != nil {
			return nil, nil, DBError("ledger: read actions to decide", err)
		}
		matched = append(matched, page...)
		if len(matched) > MaxBulkExamined {
			return nil, nil, Errorf(CodeTooManyMatched, "the filter matches more than %d actions, the most one request examines; "+
				"narrow it (status, tool, agent, namespace, since, until)", MaxBulkExamined)
		}
		if len(page) < q.Limit {
			return matched, nil, nil
		}
		q.BeforeID = page[len(page)-1].ID
	}
}

// bulkPlan is what a bulk decision would do: the actions it is allowed
// on, with their changes when it is to be written, and the others.
type bulkPlan struct {
	allowed []*record.Action
	changes []*driver.Change
	skipped []BulkSkip
}

// planMany decides d on each action as Decide would on it alone, and
// builds the changes when build is set.
func (l *Ledger) planMany(p Principal, acts []*record.Action, d DecisionInput, build bool) *bulkPlan {
	now := l.now()
	actor, identity := decider(p)
	b := &bulkPlan{skipped: []BulkSkip{}}
	for _, a := range acts {
		r, ok := l.rules[event(d.Decision)][a.Status]
		if !ok {
			b.skipped = append(b.skipped, BulkSkip{ID: a.ID, Code: CodeInvalidTransition})
			continue
		}
		pl := r(&step{now: now, ns: a.Namespace, act: a, dec: &d, actor: actor, identity: identity})
		switch {
		case pl.err != nil:
			b.skipped = append(b.skipped, BulkSkip{ID: a.ID, Code: pl.err.Code})
			continue
		case pl.record == nil:
			b.skipped = append(b.skipped, BulkSkip{ID: a.ID, Code: CodeInvalidTransition})
			continue
		}
		b.allowed = append(b.allowed, a)
		if build {
			b.changes = append(b.changes, l.newChange(a, pl, actor, nil, now))
		}
	}
	return b
}

// writeMany writes a plan's changes as one set; a change that lost its
// compare-and-set is skipped as version_conflict.
func (l *Ledger) writeMany(ctx context.Context, b *bulkPlan) (*BulkResult, error) {
	res := &BulkResult{Skipped: b.skipped}
	if len(b.changes) == 0 {
		return res, nil
	}
	u := l.single()
	written, err := l.write(ctx, u, b.changes)
	if err != nil {
		return nil, fmt.Errorf("ledger: bulk decision: %w", err)
	}
	if u.alerted {
		l.wakeDispatcher()
	}
	for i, ok := range written {
		if ok {
			res.Applied++
		} else {
			res.Skipped = append(res.Skipped, BulkSkip{ID: b.changes[i].Prev.ID, Code: CodeVersionConflict})
		}
	}
	return res, nil
}
