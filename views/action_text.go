package views

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/record"
)

// The words of the action page: what a status, an effect class, an entry or
// a decision means for the person reading it. Kept in one place so the page,
// the timeline and the panel say the same thing.

var statusMeaning = map[record.Status]string{
	record.StatusInProgress:            "an attempt is running and holds a lease",
	record.StatusSucceeded:             "the agent reported that the effect happened",
	record.StatusFailed:                "the agent reported that the attempt failed",
	record.StatusTimedOut:              "outcome unknown: the lease passed without a result, so the effect may or may not have happened",
	record.StatusRetryRequested:        "an operator asked for a retry; waiting for the agent's next intent",
	record.StatusConfirmed:             "an operator recorded that the effect happened",
	record.StatusCompensationRequested: "waiting for the agent to undo the effect, or for an operator to mark it compensated",
	record.StatusCompensated:           "the effect was undone",
	record.StatusAbandoned:             "an operator recorded that it did not happen; it will not be retried",
	record.StatusAwaitingApproval:      "held for approval: nothing runs until enough people approve it",
	record.StatusApproved:              "approved: the agent's next intent with this key runs attempt 1",
	record.StatusDenied:                "denied: the approval was rejected or expired; it will never run",
}

var effectMeaning = map[record.Effect]string{
	record.EffectReadOnly:   "reads only: repeating it changes nothing",
	record.EffectIdempotent: "sets state: repeating it is safe",
	record.EffectKeyed:      "the downstream honours the key: a retry with the same key is safe",
	record.EffectUnkeyed:    "the downstream does not deduplicate: a retry may repeat the effect",
}

// effectMeaningAt is what the effect class means for a repeat at now: a
// keyed action whose key the downstream no longer honours counts as
// unkeyed (the ledger's rule, record.Action.EffectAt).
func effectMeaningAt(a *record.Action, now time.Time) string {
	if a.Effect != a.EffectAt(now) {
		return "the downstream no longer honours the key: a retry may repeat the effect"
	}
	return effectMeaning[a.Effect]
}

// youApprovedText tells the person whose yes is already counted how many
// more the action waits for.
func youApprovedText(a *record.Action) string {
	if ap := a.Approval; ap != nil {
		if more := ap.Required - len(ap.Approvals); more > 0 {
			return fmt.Sprintf("You approved · waiting for %d more", more)
		}
	}
	return "You approved"
}

var decisionLabel = map[record.Decision]string{
	record.DecisionConfirm:         "Confirm it happened",
	record.DecisionRetry:           "Retry",
	record.DecisionCompensate:      "Compensate (undo it)",
	record.DecisionMarkCompensated: "Mark compensated",
	record.DecisionAbandon:         "Abandon",
	record.DecisionApprove:         "Approve",
	record.DecisionReject:          "Reject",
	record.DecisionAcknowledge:     "Acknowledge the alert",
}

// decisionHelp says in one line what happens after a decision and who must act.
func decisionHelp(a *record.Action, d record.Decision) string {
	switch d {
	case record.DecisionConfirm:
		return "Record that the effect happened; nobody runs anything. You may attach the downstream's reference and the result as evidence."
	case record.DecisionRetry:
		return fmt.Sprintf("The next intent with this key gets proceed as attempt %d — the agent's worker runs it again.", a.Attempt+1)
	case record.DecisionCompensate:
		return "The agent is told to undo the effect at its next intent with this key, and reports compensated when done."
	case record.DecisionMarkCompensated:
		return "Record that you undid the effect by hand; nobody else acts."
	case record.DecisionAbandon:
		return "Record that it did not happen and must never be retried; the agent's next intent is answered replay."
	case record.DecisionApprove:
		if ap := a.Approval; ap != nil && ap.Required-len(ap.Approvals) > 1 {
			return fmt.Sprintf("Add your yes: %d of %d approvals so far; each person counts once.", len(ap.Approvals), ap.Required)
		}
		return "Let it run: the agent's next intent with this key proceeds as attempt 1."
	case record.DecisionReject:
		return "Deny it for good: the agent's next intent with this key is answered denied, and nothing runs."
	case record.DecisionAcknowledge:
		return "Say you looked at the key reuse, stale outcome or late result: the alert leaves triage; the action does not change."
	}
	return ""
}

// DecidedMessage is the one line shown after a decision was recorded.
func DecidedMessage(d record.Decision, a *record.Action) string {
	switch d {
	case record.DecisionConfirm:
		return "Confirmed — the ledger now records that the effect happened."
	case record.DecisionRetry:
		return fmt.Sprintf("Retry requested — the agent's next intent with this key gets proceed as attempt %d.", a.Attempt+1)
	case record.DecisionCompensate:
		return "Compensation requested — the agent is told to undo the effect at its next intent."
	case record.DecisionMarkCompensated:
		return "Marked compensated — the ledger records that you undid the effect by hand."
	case record.DecisionAbandon:
		return "Abandoned — the action is recorded as not done and will not be retried."
	case record.DecisionApprove:
		if a.Status == record.StatusApproved {
			return "Approved — the agent's next intent with this key runs attempt 1."
		}
		return "Approval counted — more people must approve before it runs."
	case record.DecisionReject:
		return "Rejected — the action is denied and will never run."
	case record.DecisionAcknowledge:
		return "Acknowledged — the alert left triage; the action did not change."
	}
	return "Decision recorded."
}

// entryNote explains entry types that need a second look, in one line.
var entryNote = map[record.EntryType]string{
	record.TypeTimedOut:           "the lease passed without an outcome: whether the effect happened is unknown",
	record.TypeLateResult:         "reported after the lease passed",
	record.TypeOutcomeUnknown:     "the agent could not tell whether the effect happened: the action is timed out, as if its lease had passed",
	record.TypeStaleOutcome:       "from an attempt older than the current one — the effect may have happened twice",
	record.TypeStaleHeartbeat:     "a heartbeat from an attempt older than the current one; ignored",
	record.TypeKeyReused:          "the same key was offered with a different tool or params: refused, the stored action did not change",
	record.TypeLeaseLost:          "a heartbeat after the lease passed: the worker was still alive, and was told to stop",
	record.TypeRejected:           "not allowed in the state the action was in: recorded as evidence, nothing changed",
	record.TypeApprovalExpired:    "nobody approved it in time: the action is denied",
	record.TypeApprovalEscalated:  "the approval waited past its escalation time",
	record.TypeLookup:             "the agent's worker is asking its downstream whether the effect happened",
	record.TypeReconciled:         "the lookup's answer decided the action without a person",
	record.TypeCompensationFailed: "the compensation failed: the next intent compensates again",
	record.TypeCompensationTimedOut: "the compensation's lease passed without a report: whether the undo happened is unknown; " +
		"intents are held until an operator decides",
	record.TypeUnfrozen: "a freeze that held this action was lifted",
}

// entryWarns marks the entries a person must not overlook.
func entryWarns(typ record.EntryType) bool {
	switch typ {
	case record.TypeStaleOutcome, record.TypeKeyReused, record.TypeLateResult, record.TypeLeaseLost, record.TypeTimedOut,
		record.TypeOutcomeUnknown, record.TypeCompensationFailed, record.TypeCompensationTimedOut:
		return true
	}
	return false
}

// entrySummary is the line an agent's entry carries: the error, the note,
// the downstream reference.
func entrySummary(e *record.Entry) string {
	p := payloadOf(e)
	var s string
	switch {
	case p.Answer != "":
		s = AnswerText(p.Answer, p.Said)
		if e.Type == record.TypeReconciled {
			to, ok := reconciledText[p.Status]
			if !ok {
				to = string(p.Status)
			}
			s = fmt.Sprintf("%s → %s (lookup #%d)", s, to, p.LookupSeq)
		}
	case e.Type == record.TypeLookup:
		s = fmt.Sprintf("lookup lease of %s", time.Duration(p.Timeout*float64(time.Second)))
	case e.Type == record.TypeOutcomeUnknown:
		s = "outcome unknown"
		if e.Attempt != nil {
			s += fmt.Sprintf(" for attempt %d", *e.Attempt)
		}
		if p.Error != "" {
			s += ": " + p.Error
		}
	case p.Error != "":
		s = "error: " + p.Error
		if p.Retriable != nil && *p.Retriable {
			s += " (retriable)"
		}
	case p.Message != "":
		s = p.Message
	case p.ExternalRef != nil && e.Type != record.TypeDecision:
		s = "external ref: " + *p.ExternalRef
	case e.Type == record.TypeIntent && p.Approval != nil:
		s = heldIntentText(p.Tool, p.Approval)
	case e.Type == record.TypeIntent && p.Tool != "":
		s = proceedText(p.Tool, e.Attempt)
	}
	if (e.Type == record.TypeLateResult || e.Type == record.TypeStaleOutcome || e.Type == record.TypeRejected) && p.Type != "" {
		if s == "" {
			return "carried: " + string(p.Type)
		}
		return "carried: " + string(p.Type) + " — " + s
	}
	return s
}

// entrySummaryIn is entrySummary with what the rest of the timeline tells:
// an intent recorded after a compensate decision, or a second intent for
// the same attempt, was answered compensate (the ledger grants a proceed
// only with a new attempt number, and after a compensate decision no
// attempt runs again).
func entrySummaryIn(v ActionView, e *record.Entry) string {
	if e.Type == record.TypeIntent && e.Attempt != nil && compensationIntent(v.Entries, e) {
		if p := payloadOf(e); p.Approval == nil && p.Tool != "" {
			return fmt.Sprintf("compensate: the agent undoes attempt %d of %s; nothing runs again", *e.Attempt, p.Tool)
		}
	}
	return entrySummary(e)
}

func compensationIntent(entries []*record.Entry, e *record.Entry) bool {
	for _, o := range entries {
		if o.Seq >= e.Seq {
			continue
		}
		switch {
		case o.Type == record.TypeDecision && payloadOf(o).Decision == record.DecisionCompensate:
			return true
		case o.Type == record.TypeIntent && o.Attempt != nil && *o.Attempt == *e.Attempt:
			return true
		}
	}
	return false
}

// proceedText is the line of an intent the ledger answered proceed.
func proceedText(tool string, attempt *int) string {
	switch {
	case attempt == nil:
		return "proceed: " + tool + " runs"
	case *attempt > 1:
		return fmt.Sprintf("proceed: %s runs again as attempt %d, with the same key", tool, *attempt)
	}
	return fmt.Sprintf("proceed: %s runs as attempt %d", tool, *attempt)
}

// decisionAnswerText says what a decision did to the action: the status it
// led to and what the agent's next intent is answered. An approval counts
// the yeses recorded up to it.
func decisionAnswerText(v ActionView, e *record.Entry) string {
	switch payloadOf(e).Decision {
	case record.DecisionConfirm:
		return "confirmed: the ledger records that the effect happened; later intents are answered replay and nothing runs again"
	case record.DecisionRetry:
		return "retry requested: the agent's next intent with this key is answered proceed, as a new attempt"
	case record.DecisionCompensate:
		return "compensation requested: the agent's next intent with this key is answered compensate, to undo the effect"
	case record.DecisionMarkCompensated:
		return "compensated: the operator undid the effect by hand; later intents are answered replay"
	case record.DecisionAbandon:
		return "abandoned: recorded as not done; later intents are answered replay and nothing runs"
	case record.DecisionReject:
		return "denied: later intents with this key are answered denied; nothing runs"
	case record.DecisionAcknowledge:
		return "acknowledged: the review alerts before it left triage; the action did not change"
	case record.DecisionApprove:
		ap := v.Action.Approval
		if ap == nil {
			return "approval counted"
		}
		n := 0
		for _, o := range v.Entries {
			if o.Seq <= e.Seq && o.Type == record.TypeDecision && payloadOf(o).Decision == record.DecisionApprove {
				n++
			}
		}
		if n >= ap.Required {
			return fmt.Sprintf("approved: %d of %d; the agent's next intent with this key runs attempt 1", n, ap.Required)
		}
		return fmt.Sprintf("approval counted: %d of %d; nothing runs until enough people approve", n, ap.Required)
	}
	return ""
}

// reconciledText says what a lookup's answer did to the action.
var reconciledText = map[record.Status]string{
	record.StatusConfirmed:      "confirmed, nothing runs again",
	record.StatusRetryRequested: "retry requested, the next intent is answered proceed",
	record.StatusTimedOut:       "still timed out, a person decides",
}

// heldIntentText is the line of an intent the ledger answered
// pending_approval: what it needs, who asked for it, and that nothing ran.
func heldIntentText(tool string, ar *record.ApprovalRequest) string {
	approvals := "approvals"
	if ar.Required == 1 {
		approvals = "approval"
	}
	var why []string
	for _, p := range ar.Policies {
		why = append(why, p.Name)
	}
	if ar.RequireApproval {
		why = append(why, "asked by the intent")
	}
	reason := strings.Join(why, ", ")
	if ar.Error != "" {
		reason += ": its condition failed: " + ar.Error
	}
	s := fmt.Sprintf("pending approval: %s needs %d %s", tool, ar.Required, approvals)
	if reason != "" {
		s += " (" + reason + ")"
	}
	return s + "; nothing ran"
}

// jsonIndented indents a JSON document for reading. Stored payloads escape
// <, > and & as \u003c…; they are shown as the characters they are, since
// templ escapes the text on output anyway. Numbers keep their digits.
//
// What it shows is bounded whatever was stored (documents from before the
// ledger limited their shape, or read from elsewhere): a document nested
// deeper than maxIndentDepth is shown compact, since indenting it costs the
// square of its depth, and any text is cut at maxRenderedJSON bytes.
func jsonIndented(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	if depth, _ := services.JSONShape(raw); depth > maxIndentDepth {
		var b bytes.Buffer
		if json.Compact(&b, raw) != nil {
			return boundedJSON(string(raw))
		}
		return boundedJSON(b.String())
	}
	return boundedJSON(indentJSON(raw))
}

// Bounds of one JSON block on a page.
const (
	maxIndentDepth  = 16
	maxRenderedJSON = 256 << 10
)

// boundedJSON cuts s at maxRenderedJSON bytes (on a rune boundary) and says
// how much was left out.
func boundedJSON(s string) string {
	if len(s) <= maxRenderedJSON {
		return s
	}
	cut := maxRenderedJSON
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("\n… %d more bytes not shown; read the whole document from the API", len(s)-cut)
}

func indentJSON(raw json.RawMessage) string {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if dec.Decode(&v) != nil || enc.Encode(v) != nil {
		return string(raw)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// leaseText says until when the lease runs, or since when it has passed.
func leaseText(a *record.Action, now time.Time) string {
	if a.LeaseUntil == nil {
		return "none"
	}
	if !a.LeaseUntil.After(now) {
		return "passed " + timeRel(*a.LeaseUntil, now) + " (at " + timeAbs(*a.LeaseUntil) + ")"
	}
	return "until " + timeAbs(*a.LeaseUntil) + " (" + timeRel(*a.LeaseUntil, now) + ")"
}

// AnswerText says what a lookup found, as an operator reads it:
// "provider says: not found — {"status":"none"}".
func AnswerText(a record.Answer, said string) string {
	s := "provider says: " + answerWords[a]
	if said != "" {
		s += " — " + said
	}
	return s
}

var answerWords = map[record.Answer]string{
	record.AnswerHappened:    "it happened",
	record.AnswerNotHappened: "not found",
	record.AnswerUnknown:     "cannot tell",
}

// LookupSummary is the line triage shows for an action whose outcome is
// being looked up, or was: the last answer of the current attempt, the
// lookup in flight, or what its compensation went through; "" for none.
func LookupSummary(a *record.Action, now time.Time) string {
	rc := a.Reconciliation
	if rc == nil {
		return ""
	}
	var parts []string
	if a.Status == record.StatusTimedOut {
		if rc.LookupAttempt == a.Attempt && rc.LookupUntil != nil && rc.LookupUntil.After(now) {
			parts = append(parts, "lookup in flight")
		}
		if l := rc.LastLookup; l != nil && l.Attempt == a.Attempt {
			parts = append(parts, AnswerText(l.Answer, l.Said)+" ("+timeRel(l.At, now)+")")
			if l.Answer == record.AnswerNotHappened && a.EffectAt(now) == record.EffectUnkeyed {
				parts = append(parts, "a retry may duplicate it")
			}
		}
		if rc.LookupAttempt == a.Attempt && rc.Lookups >= record.MaxLookups {
			parts = append(parts, "no lookups left for this attempt")
		}
	}
	if a.Status == record.StatusCompensationRequested {
		if rc.CompensationTimedOut {
			parts = append(parts, "compensation lease passed: undo unknown")
		}
		if rc.CompensationFailures > 0 {
			s := fmt.Sprintf("compensation failed %d×", rc.CompensationFailures)
			if rc.CompensationError != nil {
				s += ": " + *rc.CompensationError
			}
			parts = append(parts, s)
		}
	}
	if a.Effect == record.EffectKeyed && a.KeyExpired(now) && (a.Status == record.StatusTimedOut || a.Status == record.StatusFailed) {
		parts = append(parts, "key expired at the downstream: counts as unkeyed")
	}
	return strings.Join(parts, " · ")
}

// approvalCount says how far an approval is: "1 of 2 approvals".
func approvalCount(ap *record.Approval) string {
	s := fmt.Sprintf("%d of %d approvals", len(ap.Approvals), ap.Required)
	if ap.Required == 1 {
		s = fmt.Sprintf("%d of 1 approval", len(ap.Approvals))
	}
	return s
}

// policiesText names what holds an action: the freezes, the policy
// versions and the limits that caught it, or says the intent asked for
// approval itself.
func policiesText(ap *record.Approval) string {
	if len(ap.Policies) == 0 && len(ap.Limits) == 0 && len(ap.FrozenBy) == 0 {
		return "the intent asked for approval (require_approval)"
	}
	names := make([]string, 0, len(ap.Policies)+len(ap.Limits)+len(ap.FrozenBy))
	for _, f := range ap.FrozenBy {
		names = append(names, fmt.Sprintf("frozen by %q", f.Reason))
	}
	for _, p := range ap.Policies {
		names = append(names, fmt.Sprintf("%s (version %d)", p.Name, p.Version))
	}
	for _, l := range ap.Limits {
		names = append(names, fmt.Sprintf("held by limit %s (use %s of %s)", l.Name, amountText(l.Used), amountText(l.Max))+
			" — "+limitOverText(l))
	}
	s := strings.Join(names, ", ")
	if ap.Error != "" {
		s += "; held because a condition failed: " + ap.Error
	}
	return s
}

// ApprovalSummary is the line the triage queue shows for an action awaiting
// approval: "1 of 2 approvals · expires in 42 min · large refunds (version 1)".
func ApprovalSummary(ap *record.Approval, now time.Time) string {
	if ap == nil {
		return ""
	}
	if ap.Required == 0 {
		return "no approval needed once lifted · expires " + timeRel(ap.ExpiresAt, now) + " · " + policiesText(ap)
	}
	return approvalCount(ap) + " · expires " + timeRel(ap.ExpiresAt, now) + " · " + policiesText(ap)
}

// RefusalText words a refused decision for the person in the decision
// panel: what happened (nothing was written) and what to do next, never the
// API's field names or codes. The API keeps its own message; it is shown
// only for a refusal this list does not know.
func RefusalText(code, message string) string {
	switch code {
	case services.CodeInvalid, services.CodeInvalidJSON:
		return invalidDecisionText(message)
	case services.CodeDuplicateRiskUnacknowledged:
		return "Not retried: this retry counts as unkeyed, since the downstream would not recognise it as a repeat, so it may repeat the effect (a second refund, a second email). Check the downstream system, then tick the box to say you understand, and retry."
	case services.CodeAlreadyApproved:
		return "You already approved this action; it waits for someone else's yes."
	case services.CodeApprovalExpired:
		return "Too late: the approval expired, so the action is denied and will never run."
	case services.CodeApproverUnknown:
		return "Not approved: an approval counts a person, and this request was not made as one. Approve signed in as yourself, or with an API key that has an owner."
	case services.CodeVersionConflict:
		return "Nothing was written: the action changed after you opened it. Read what changed, then decide again on the state it is in now."
	case services.CodeInvalidTransition:
		return "Nothing was written: this decision is not allowed in the state the action is in now (someone may have decided first). The panel below offers what you can decide now."
	case services.CodeForbidden:
		return "Nothing was written: you may read this action, but you may not decide in its namespace. An operator of the namespace or an admin can."
	case services.CodeNotFound:
		return "Nothing was written: this action is no longer there, or you may no longer see it."
	case services.CodeConflict:
		return "Nothing was written: the action is changing too fast to record your decision. Wait a moment and decide again."
	case services.CodeUnavailable:
		return "Nothing was written: the database cannot be reached right now. Wait a moment and decide again; nothing you saw recorded was lost."
	case services.CodeBodyTooLarge:
		return "Nothing was written: what you typed is too long to send. Shorten the reason or the result and decide again."
	}
	return message
}

// invalidDecisionText words a form the ledger refused as invalid, by the
// field its message names (services.DecisionInput.Validate).
func invalidDecisionText(message string) string {
	switch {
	case strings.Contains(message, "evidence for confirm"), strings.Contains(message, "applies to retry"):
		// A field of another decision's form: the page is out of date.
	case strings.Contains(message, `"reason" is required`):
		return "Nothing was written: give a reason. It is kept in the ledger for whoever reads this action later."
	case strings.Contains(message, `"reason"`):
		return fmt.Sprintf("Nothing was written: the reason is too long or holds characters that cannot be kept. Keep it under %d bytes of plain text.", services.MaxReasonBytes)
	case strings.Contains(message, `"result"`):
		return `Nothing was written: the result must be JSON, such as {"refund": "re_123"}, of at most 64 KiB, or left empty.`
	case strings.Contains(message, `"external_ref"`):
		return "Nothing was written: the external reference must be one line of printable text of at most 255 bytes, or left empty."
	}
	return "Nothing was written: the form did not come from this page as it is now (a field is missing or belongs to another decision). Reload the page and decide again."
}

// limitOverText says how an intent would take a limit's group over its max:
// "daily refunds (version 2), group c_1: 480 used + 50 > 500".
func limitOverText(l record.ApprovalLimit) string {
	return fmt.Sprintf("%s (version %d), %s: %s used + %s > %s", l.Name, l.Version, groupText(l.Group),
		amountText(l.Used), amountText(l.Amount), amountText(l.Max))
}

// groupText names a limit's group; the empty group is the namespace's one.
func groupText(g string) string {
	if g == "" {
		return "the whole namespace"
	}
	return "group " + g
}

// amountText writes an amount as short as it is exact: 50, 12.5.
func amountText(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
