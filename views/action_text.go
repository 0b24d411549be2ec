package views

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/arbiter-ledger/arbiter/services"
)

// The words of the action page: what a status, an effect class, an entry or
// a decision means for the person reading it. Kept in one place so the page,
// the timeline and the panel say the same thing.

var statusMeaning = map[services.Status]string{
	services.StatusInProgress:            "an attempt is running and holds a lease",
	services.StatusSucceeded:             "the agent reported that the effect happened",
	services.StatusFailed:                "the agent reported that the attempt failed",
	services.StatusTimedOut:              "outcome unknown: the lease passed without a result, so the effect may or may not have happened",
	services.StatusRetryRequested:        "an operator asked for a retry; waiting for the agent's next intent",
	services.StatusConfirmed:             "an operator recorded that the effect happened",
	services.StatusCompensationRequested: "waiting for the agent to undo the effect, or for an operator to mark it compensated",
	services.StatusCompensated:           "the effect was undone",
	services.StatusAbandoned:             "an operator recorded that it did not happen; it will not be retried",
}

var effectMeaning = map[string]string{
	services.EffectReadOnly:   "reads only: repeating it changes nothing",
	services.EffectIdempotent: "sets state: repeating it is safe",
	services.EffectKeyed:      "the downstream honours the key: a retry with the same key is safe",
	services.EffectUnkeyed:    "the downstream does not deduplicate: a retry may repeat the effect",
}

var decisionLabel = map[string]string{
	"confirm":          "Confirm it happened",
	"retry":            "Retry",
	"compensate":       "Compensate (undo it)",
	"mark_compensated": "Mark compensated",
	"abandon":          "Abandon",
}

// decisionHelp says in one line what happens after a decision and who must act.
func decisionHelp(a *services.Action, d string) string {
	switch d {
	case "confirm":
		return "Record that the effect happened; nobody runs anything. You may attach the downstream's reference and the result as evidence."
	case "retry":
		return fmt.Sprintf("The next intent with this key gets proceed as attempt %d — the agent's worker runs it again.", a.Attempt+1)
	case "compensate":
		return "The agent is told to undo the effect at its next intent with this key, and reports compensated when done."
	case "mark_compensated":
		return "Record that you undid the effect by hand; nobody else acts."
	case "abandon":
		return "Record that it did not happen and must never be retried; the agent's next intent is answered replay."
	}
	return ""
}

// DecidedMessage is the one line shown after a decision was recorded.
func DecidedMessage(d string, a *services.Action) string {
	switch d {
	case "confirm":
		return "Confirmed — the ledger now records that the effect happened."
	case "retry":
		return fmt.Sprintf("Retry requested — the agent's next intent with this key gets proceed as attempt %d.", a.Attempt+1)
	case "compensate":
		return "Compensation requested — the agent is told to undo the effect at its next intent."
	case "mark_compensated":
		return "Marked compensated — the ledger records that you undid the effect by hand."
	case "abandon":
		return "Abandoned — the action is recorded as not done and will not be retried."
	}
	return "Decision recorded."
}

// entryNote explains entry types that need a second look, in one line.
var entryNote = map[string]string{
	services.TypeTimedOut:       "the lease passed without an outcome: whether the effect happened is unknown",
	services.TypeLateResult:     "reported after the lease passed",
	services.TypeStaleOutcome:   "from an attempt older than the current one — the effect may have happened twice",
	services.TypeStaleHeartbeat: "a heartbeat from an attempt older than the current one; ignored",
	services.TypeKeyReused:      "the same key was offered with a different tool or params: refused, the stored action did not change",
	services.TypeLeaseLost:      "a heartbeat after the lease passed: the worker was still alive, and was told to stop",
	services.TypeRejected:       "not allowed in the state the action was in: recorded as evidence, nothing changed",
}

// entryWarns marks the entries a person must not overlook.
func entryWarns(typ string) bool {
	switch typ {
	case services.TypeStaleOutcome, services.TypeKeyReused, services.TypeLateResult, services.TypeLeaseLost, services.TypeTimedOut:
		return true
	}
	return false
}

// entrySummary is the line an agent's entry carries: the error, the note,
// the downstream reference.
func entrySummary(e *services.Entry) string {
	p := payloadOf(e)
	var s string
	switch {
	case p.Error != "":
		s = "error: " + p.Error
		if p.Retriable != nil && *p.Retriable {
			s += " (retriable)"
		}
	case p.Message != "":
		s = p.Message
	case p.ExternalRef != nil && e.Type != services.TypeDecision:
		s = "external ref: " + *p.ExternalRef
	case e.Type == services.TypeIntent && p.Tool != "":
		s = "proceed with " + p.Tool
	}
	if (e.Type == services.TypeLateResult || e.Type == services.TypeStaleOutcome || e.Type == services.TypeRejected) && p.Type != "" {
		if s == "" {
			return "carried: " + p.Type
		}
		return "carried: " + p.Type + " — " + s
	}
	return s
}

// jsonIndented indents a JSON document for reading. Stored payloads escape
// <, > and & as \u003c…; they are shown as the characters they are, since
// templ escapes the text on output anyway. Numbers keep their digits.
func jsonIndented(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
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
func leaseText(a *services.Action, now time.Time) string {
	if a.LeaseUntil == nil {
		return "none"
	}
	if !a.LeaseUntil.After(now) {
		return "passed " + timeRel(*a.LeaseUntil, now) + " (at " + timeAbs(*a.LeaseUntil) + ")"
	}
	return "until " + timeAbs(*a.LeaseUntil) + " (" + timeRel(*a.LeaseUntil, now) + ")"
}

func strOrEmpty(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
