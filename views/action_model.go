package views

import (
	"encoding/json"
	"github.com/arbiter-ledger/arbiter/services/evidence"
	"slices"
	"time"

	"github.com/arbiter-ledger/arbiter/services/webhooks"

	"github.com/arbiter-ledger/arbiter/services/record"

	"github.com/arbiter-ledger/arbiter/services"
)

// ActionView is what one action's page shows: the action and its timeline
// as read together, and the state of the decision panel.
type ActionView struct {
	Action  *record.Action
	Entries []*record.Entry // oldest first, ending with the entry that made Action's state
	// Marks are the entries' places in the evidence log, by entry id (nil:
	// the page shows none).
	Marks map[string]evidence.Mark
	Now   time.Time
	CSRF  string
	// CanDecide is whether the signed-in user may decide; a viewer gets a
	// read-only note instead of the panel.
	CanDecide bool
	// Approved is whether the signed-in person's yes is already among the
	// action's approvals: they are not offered Approve again.
	Approved bool
	// Notice confirms a decision taken through htmx; without JavaScript the
	// same line arrives as the page's flash after the redirect.
	Notice   string
	Form     DecisionForm
	Conflict *DecisionConflict
	// Deliveries are the webhook deliveries the action's changes caused,
	// newest first.
	Deliveries []*webhooks.Delivery
	// Admin is whether the signed-in user manages webhook endpoints: a
	// delivery links to its endpoint's page for them.
	Admin bool
	// Older is the seq the page before Entries ends below; 0 when Entries
	// starts at the first entry.
	Older int
}

// DecisionForm is what the operator typed, kept when a decision is refused
// so that nobody has to type a reason twice at 3 a.m.
type DecisionForm struct {
	Decision     string
	Reason       string
	ExternalRef  string
	Result       string
	Acknowledged bool
	// Error is why the decision was refused, shown next to the panel.
	Error string
}

// DecisionConflict is what changed between the page the operator decided on
// and now.
type DecisionConflict struct {
	SeenVersion int
	SeenStatus  string
	// Since are the entries recorded after the newest one the operator saw.
	Since []*record.Entry
}

// SeenSeq is the seq of the newest entry shown, sent back with a decision so
// that a conflict can show what came after it.
func (v ActionView) SeenSeq() int {
	if len(v.Entries) == 0 {
		return 0
	}
	return v.Entries[len(v.Entries)-1].Seq
}

// Allowed lists the decisions the action's status allows now.
func (v ActionView) Allowed() []record.Decision { return services.AllowedDecisions(v.Action) }

// KeyReuse is one refused intent that offered the action's key with other
// params, set beside what is stored.
type KeyReuse struct {
	Entry              *record.Entry
	OfferedTool        string
	OfferedFingerprint string
	OfferedParams      json.RawMessage
	// Rows compare the params key by key; empty when either side is not a
	// JSON object, and then the whole documents are shown side by side.
	Rows []ParamRow
}

// ParamRow compares one top-level key of the params.
type ParamRow struct {
	Key     string
	Stored  json.RawMessage // nil when the key is absent
	Offered json.RawMessage
	Change  string // same, changed, added (only offered) or removed (only stored)
}

// KeyReuses lists the key_reused entries of the timeline, compared with the
// stored params.
func (v ActionView) KeyReuses() []KeyReuse {
	var out []KeyReuse
	for _, e := range v.Entries {
		if e.Type != record.TypeKeyReused {
			continue
		}
		var p record.KeyReusedPayload
		_ = json.Unmarshal(e.Payload, &p) // a payload we cannot read shows as empty, never fails the page
		out = append(out, KeyReuse{Entry: e, OfferedTool: p.Tool, OfferedFingerprint: p.Fingerprint,
			OfferedParams: p.Params, Rows: compareParams(v.Action.Params, p.Params)})
	}
	return out
}

// compareParams compares two params objects per top-level key, sorted by
// key. Values are compared in canonical form: the offered params went through
// the entry payload's encoding, which escapes characters the stored ones keep.
func compareParams(stored, offered json.RawMessage) []ParamRow {
	var s, o map[string]json.RawMessage
	if json.Unmarshal(orEmptyObject(stored), &s) != nil || json.Unmarshal(orEmptyObject(offered), &o) != nil {
		return nil
	}
	keys := make([]string, 0, len(s)+len(o))
	for k := range s {
		keys = append(keys, k)
	}
	for k := range o {
		if _, ok := s[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	rows := make([]ParamRow, 0, len(keys))
	for _, k := range keys {
		sv, inS := s[k]
		ov, inO := o[k]
		sv, ov = canonicalOrSame(sv), canonicalOrSame(ov)
		r := ParamRow{Key: k, Stored: sv, Offered: ov}
		switch {
		case !inS:
			r.Change = "added"
		case !inO:
			r.Change = "removed"
		case string(sv) == string(ov):
			r.Change = "same"
		default:
			r.Change = "changed"
		}
		rows = append(rows, r)
	}
	return rows
}

func canonicalOrSame(raw json.RawMessage) json.RawMessage {
	if raw == nil {
		return nil
	}
	if c, err := services.Canonicalize(raw); err == nil {
		return c
	}
	return raw
}

func orEmptyObject(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 || string(raw) == "null" {
		return json.RawMessage("{}")
	}
	return raw
}

// entryPayload is the part of an entry's payload the timeline shows inline,
// gathered from the payload struct of the entry's type.
type entryPayload struct {
	Decision     record.Decision
	Reason       string
	Acknowledged bool
	ExternalRef  *string
	Error        string
	Retriable    *bool
	Message      string
	Type         record.EntryType // the type a late, stale or refused entry carried
	Tool         string
	// Approval is set on an intent that was held for approval.
	Approval *record.ApprovalRequest
	// A lookup's lease, its answer and the change it made.
	Timeout   float64
	Answer    record.Answer
	Said      string
	Status    record.Status
	LookupSeq int
}

func payloadOf(e *record.Entry) entryPayload {
	var v entryPayload
	p, err := record.DecodePayload(e)
	if err != nil {
		return v // fields we cannot read stay empty; the raw payload is still shown
	}
	switch p := p.(type) {
	case *record.DecisionPayload:
		v.Decision, v.Reason, v.Acknowledged, v.ExternalRef = p.Decision, p.Reason, p.AcknowledgeDuplicateRisk, p.ExternalRef
	case *record.ReportPayload:
		v.ExternalRef, v.Retriable, v.Type = p.ExternalRef, p.Retriable, p.Type
		v.Error, v.Message, v.Tool = deref(p.Error), deref(p.Message), deref(p.Tool)
	case *record.IntentPayload:
		v.Tool, v.Approval = p.Tool, p.Approval
	case *record.KeyReusedPayload:
		v.Tool = p.Tool
	case *record.LookupPayload:
		v.Timeout = p.Timeout
	case *record.LookupResultPayload:
		v.Answer, v.ExternalRef, v.Said = p.Answer, p.ExternalRef, record.Said(p.Evidence)
	case *record.ReconciledPayload:
		v.Answer, v.Status, v.LookupSeq = p.Answer, p.Status, p.LookupSeq
	}
	return v
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
