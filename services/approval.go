package services

import (
	"context"
	"encoding/json"
	"time"

	"github.com/arbiter-ledger/arbiter/services/record"
)

// Approval before execution, as rows of the rules table (machine.go): a
// first intent that needs approval creates its action awaiting_approval at
// attempt 0, distinct people approve it, and the next intent runs attempt 1;
// a rejection or the expiry denies it. The sweeper meets its deadlines
// (escalation once, then expiry) through the deadlines table.

// DefaultApprovalExpiry is how long an approval waits when nothing says
// otherwise (SPEC: expires_after defaults to 86400 seconds).
const DefaultApprovalExpiry = 24 * time.Hour

var (
	evApprove = event(record.DecisionApprove)
	evReject  = event(record.DecisionReject)
)

// approvalExpiry is an approved action's deadline: its expiry, if the
// intent has not proceeded by then.
func approvalExpiry(a *record.Action) *time.Time {
	t := a.Approval.ExpiresAt
	return &t
}

// Approver says what the first intent of a key needs before it may run:
// nil when no policy catches it. The ledger asks it once per new key,
// before deciding; package policies implements it.
type Approver interface {
	Require(ctx context.Context, q ApprovalQuery) (*record.ApprovalRequest, error)
}

// ApprovalQuery is what an approver may read about an intent.
type ApprovalQuery struct {
	Namespace, Tool, Effect, Agent, Reference, RunID string
	Params                                           json.RawMessage
	Now                                              time.Time
}

// asked is the approver's answer about an intent that may be the first of
// its key, asked before the write: conditions run under their own time
// bound (package policies), and nothing another writer needs may wait for
// them, least of all SQLite's single writer. Nil when it was not asked.
type asked struct {
	req *record.ApprovalRequest
	err error
	// limits are the limits the intent matches (limits.go), and limitErr
	// why the limiter could not say.
	limits   []LimitMatch
	limitErr error
	// at is the time the approver was asked with; the request's times are
	// moved to the time the intent is recorded (requestAt).
	at time.Time
}

// ask asks the approver about in before any write, if in is an intent that
// may be the first of its key (one of a key known to exist is not asked).
func (l *Ledger) ask(ctx context.Context, p Principal, in *EntryInput) *asked {
	if (l.approver == nil && l.limiter == nil) || in.Type != record.TypeIntent || l.known.has(p.Namespace, in.Key) {
		return nil
	}
	now := l.now()
	req, err := l.approvalFor(ctx, p.Namespace, in, p.Name, now)
	a := &asked{req: req, err: err, at: now}
	if l.limiter != nil {
		a.limits, a.limitErr = l.limiter.Limits(ctx, l.queryFor(p.Namespace, in, p.Name, now))
	}
	return a
}

// requestAt is what the intent needs when recorded at now: asked's answer
// with its deadlines counted from now, or, when the approver was not asked
// before (a key thought to exist that did not), the approver's answer now.
func (l *Ledger) requestAt(ctx context.Context, a *asked, p Principal, in *EntryInput, now time.Time) (*record.ApprovalRequest, error) {
	if a == nil {
		return l.approvalFor(ctx, p.Namespace, in, p.Name, now)
	}
	if a.err != nil || a.req == nil {
		return a.req, a.err
	}
	req := *a.req
	d := now.Sub(a.at)
	req.ExpiresAt = req.ExpiresAt.Add(d)
	if req.EscalateAt != nil {
		t := req.EscalateAt.Add(d)
		req.EscalateAt = &t
	}
	return &req, nil
}

// approvalFor asks the approver about a first intent; nil without one.
// The policies' agent is the API key's name (keyName), never the label the
// entry chose, so an agent cannot step around a rule by naming itself
// differently.
func (l *Ledger) approvalFor(ctx context.Context, ns string, in *EntryInput, keyName string, now time.Time) (*record.ApprovalRequest, error) {
	if l.approver == nil || in.Type != record.TypeIntent {
		return nil, nil
	}
	return l.approver.Require(ctx, l.queryFor(ns, in, keyName, now))
}

// queryFor is what the approver and the limiter read of a first intent.
func (l *Ledger) queryFor(ns string, in *EntryInput, keyName string, now time.Time) ApprovalQuery {
	q := ApprovalQuery{Namespace: ns, Tool: *in.Tool, Effect: string(record.EffectUnkeyed), Agent: keyName,
		Params: in.Params, Now: now}
	if in.Effect != nil {
		q.Effect = string(*in.Effect)
	}
	if in.Reference != nil {
		q.Reference = *in.Reference
	}
	if in.RunID != nil {
		q.RunID = *in.RunID
	}
	return q
}

// approvalRequest is what a first intent needs before it may run, or nil:
// what the policies found (step.approval) and what the intent asked itself
// (require_approval: one person, the default expiry). The largest number
// of approvals and the earliest deadlines win.
func approvalRequest(s *step) *record.ApprovalRequest {
	req := s.approval
	if req != nil && req.Required == 0 {
		req = nil // only shadow policies matched
	}
	if holds, required := limitHolds(s.limits); len(holds) > 0 {
		if req == nil {
			req = &record.ApprovalRequest{ExpiresAt: s.now.Add(DefaultApprovalExpiry), Policies: []record.PolicyRef{}}
		} else {
			c := *req
			req = &c
		}
		req.Limits, req.Required = holds, max(req.Required, required)
	}
	if len(s.frozen) > 0 {
		if req == nil {
			req = &record.ApprovalRequest{ExpiresAt: s.now.Add(DefaultApprovalExpiry), Policies: []record.PolicyRef{}}
		} else {
			c := *req
			req = &c
		}
		req.FrozenBy = s.frozen
	}
	if s.in.RequireApproval == nil || !*s.in.RequireApproval {
		return req
	}
	if req == nil {
		return &record.ApprovalRequest{Required: 1, ExpiresAt: s.now.Add(DefaultApprovalExpiry),
			Policies: []record.PolicyRef{}, RequireApproval: true}
	}
	c := *req
	c.RequireApproval = true
	if expires := s.now.Add(DefaultApprovalExpiry); expires.Before(c.ExpiresAt) {
		c.ExpiresAt = expires
	}
	return &c
}

// holdForApproval turns the plan of a new action into one that waits for
// approval: attempt 0, no lease, the requirement recorded on the action and
// in the intent's entry, and action.approval_requested alerted.
func holdForApproval(pl plan, req *record.ApprovalRequest) plan {
	a := pl.next
	a.Status, a.Attempt, a.LeaseUntil = record.StatusAwaitingApproval, 0, nil
	a.Approval = &record.Approval{Required: req.Required, Approvals: []record.Vote{}, ExpiresAt: req.ExpiresAt,
		EscalateAt: req.EscalateAt, Policies: req.Policies, Limits: req.Limits, FrozenBy: req.FrozenBy, Error: req.Error}
	p := pl.record.payload.(*record.IntentPayload)
	p.Approval = req
	pl.outcome, pl.record.attempt = record.OutcomePendingApproval, nil
	pl.events = []record.EventType{record.EventApprovalRequested}
	if len(req.Limits) > 0 {
		pl.events = append(pl.events, record.EventLimitExceeded)
	}
	return pl
}

// decider is who takes a decision as p: the actor the record names and the
// identity approvals are counted by. A person is one identity however they
// decide: in the dashboard, or with any API key they own. A key without an
// owner is named by its own name and has no identity: it may not approve.
// Via says how, so a key named like a person never reads as one.
func decider(p Principal) (record.Actor, string) {
	switch {
	case p.Kind == "user":
		return record.Actor{Kind: record.ActorOperator, Name: p.Name, Via: "dashboard"}, "user:" + p.ID
	case p.OwnerID != "":
		return record.Actor{Kind: record.ActorOperator, Name: p.OwnerEmail, Via: "api_key:" + p.Name}, "user:" + p.OwnerID
	}
	return record.Actor{Kind: record.ActorOperator, Name: p.Name, Via: "api_key:" + p.Name}, ""
}

// Decider is the actor the ledger records for what p decides or starts
// (a decision, a freeze).
func Decider(p Principal) record.Actor {
	a, _ := decider(p)
	return a
}

// HasApproved reports whether the person deciding as p already approved a:
// the dashboard asks it so that it never offers a second yes the ledger
// would refuse.
func HasApproved(a *record.Action, p Principal) bool {
	_, identity := decider(p)
	return identity != "" && a.Approval != nil && a.Approval.Voted(identity)
}

// mayApprove refuses an approval no person would be counted for.
func mayApprove(p Principal, d DecisionInput) error {
	if d.Decision != record.DecisionApprove {
		return nil
	}
	if _, identity := decider(p); identity == "" {
		return approverUnknown(p.Name)
	}
	return nil
}

func approverUnknown(key string) *Error {
	return Errorf(CodeApproverUnknown, "API key %q belongs to no one, and an approval counts a person: "+
		"approve in the dashboard, or with a key that has an owner (`arbiter keys create --owner EMAIL`, "+
		"or one created in the dashboard, which belongs to whoever created it)", key)
}

// approve counts one distinct person's yes; the last one needed approves
// the action. An identity that approved already is refused and nothing is
// written.
func approve(s *step) plan {
	if s.act.Approval == nil {
		return noApproval(s)
	}
	if approvalExpired(s) {
		pl := expireApproval(s)
		pl.outcome, pl.actor = record.OutcomeRejected, &systemActor
		pl.err = Errorf(CodeApprovalExpired, "the approval of action %s expired at %s; it is denied and can no longer be approved",
			s.act.ID, s.act.Approval.ExpiresAt.Format(time.RFC3339))
		return pl
	}
	if s.identity == "" {
		return plan{outcome: record.OutcomeRejected, err: approverUnknown(s.actor.Name)}
	}
	if s.act.Approval.Voted(s.identity) {
		return plan{outcome: record.OutcomeRejected, err: Errorf(CodeAlreadyApproved,
			"%s already approved action %s; %d of %d approvals so far", s.actor.Name, s.act.ID,
			len(s.act.Approval.Approvals), s.act.Approval.Required)}
	}
	pl := decide(record.StatusAwaitingApproval)(s)
	next := pl.next
	next.Approval.Approvals = append(next.Approval.Approvals,
		record.Vote{By: s.actor, At: s.now, Reason: s.dec.Reason, Identity: s.identity})
	if next.Approval.Approved() {
		next.Status = record.StatusApproved
		pl.events = append(pl.events, record.EventApproved)
	}
	return pl
}

// reject denies the action for good.
func reject(s *step) plan {
	if s.act.Approval == nil {
		return noApproval(s)
	}
	pl := decide(record.StatusDenied)(s)
	pl.next.Approval.Rejection = &record.Vote{By: s.actor, At: s.now, Reason: s.dec.Reason, Identity: s.identity}
	return pl
}

// noApproval refuses an approval decision on an action that carries no
// approval to decide.
func noApproval(s *step) plan {
	return plan{outcome: record.OutcomeRejected, err: Errorf(CodeInvalidTransition,
		"action %s carries no approval to decide", s.act.ID)}
}

// approvalDeadline decides a passed approval deadline: the escalation is
// recorded and alerted once; the expiry denies the action.
func approvalDeadline(s *step) plan {
	ap := s.act.Approval
	payload := &record.ApprovalDeadlinePayload{Approvals: len(ap.Approvals), EscalateAt: ap.EscalateAt,
		ExpiresAt: ap.ExpiresAt, Required: ap.Required}
	next := s.act.Clone()
	if s.now.Before(ap.ExpiresAt) {
		if s.act.Status != record.StatusAwaitingApproval || ap.Escalated || ap.EscalateAt == nil || s.now.Before(*ap.EscalateAt) {
			return plan{} // not due: the deadline moved since it was read
		}
		next.Approval.Escalated = true
		return plan{outcome: record.OutcomeRecorded, next: next,
			record: &recordSpec{typ: record.TypeApprovalEscalated, payload: payload},
			events: []record.EventType{record.EventApprovalEscalated}}
	}
	return expireApproval(s)
}

// approvalExpired reports whether the action's approval expired by now.
func approvalExpired(s *step) bool {
	ap := s.act.Approval
	return ap != nil && !s.now.Before(ap.ExpiresAt)
}

// expireApproval denies an action whose approval expired, as the sweeper
// records it; an agent's intent or an approve that comes first records it
// the same way, written by the system (plan.actor).
func expireApproval(s *step) plan {
	ap := s.act.Approval
	next := s.act.Clone()
	next.Status = record.StatusDenied
	return plan{outcome: record.OutcomeRecorded, next: next,
		record: &recordSpec{typ: record.TypeApprovalExpired, payload: &record.ApprovalDeadlinePayload{
			Approvals: len(ap.Approvals), EscalateAt: ap.EscalateAt, ExpiresAt: ap.ExpiresAt, Required: ap.Required}},
		events: []record.EventType{record.EventApprovalExpired}}
}

// unlessExpired answers an intent with r while the approval runs; after
// expires_at the intent is denied and the expiry recorded, whether or not
// the sweeper has run.
func unlessExpired(r rule) rule {
	return func(s *step) plan {
		if !approvalExpired(s) {
			return r(s)
		}
		pl := expireApproval(s)
		pl.outcome, pl.actor = record.OutcomeDenied, &systemActor
		return pl
	}
}
