package views

import (
	"net/url"
	"os"
	"regexp"
	"slices"
	"testing"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/record"
)

// The words of the pages cover the whole vocabulary: each test walks one of
// record's lists, so a status, effect class, decision, entry type or answer
// added there and given no words here fails, rather than showing a blank.

// TestEveryStatusHasWords: the action page says what each status means,
// and the stylesheet colours it.
func TestEveryStatusHasWords(t *testing.T) {
	t.Parallel()
	css, err := os.ReadFile("../static/app.css")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range record.Statuses {
		if statusMeaning[s] == "" {
			t.Errorf("status %s has no statusMeaning (views/action_text.go)", s)
		}
		if !regexp.MustCompile(`\.status-` + regexp.QuoteMeta(string(s)) + `\b`).Match(css) {
			t.Errorf("status %s has no .status-%s rule in static/app.css", s, s)
		}
	}
	if len(statusMeaning) != len(record.Statuses) {
		t.Errorf("statusMeaning has %d statuses; record.Statuses has %d", len(statusMeaning), len(record.Statuses))
	}
}

// TestEveryEffectHasWords: the action page says what each effect class
// means for a repeat.
func TestEveryEffectHasWords(t *testing.T) {
	t.Parallel()
	for _, e := range record.Effects {
		if effectMeaning[e] == "" {
			t.Errorf("effect %s has no effectMeaning (views/action_text.go)", e)
		}
	}
	if len(effectMeaning) != len(record.Effects) {
		t.Errorf("effectMeaning has %d effects; record.Effects has %d", len(effectMeaning), len(record.Effects))
	}
}

// TestEveryDecisionHasWords: each decision has its button's label, its
// line of help, and its own message once recorded (not the fallback).
func TestEveryDecisionHasWords(t *testing.T) {
	t.Parallel()
	a := &record.Action{Status: record.StatusApproved, Attempt: 1,
		Approval: &record.Approval{Required: 1, Approvals: []record.Vote{}}}
	for _, d := range record.Decisions {
		if decisionLabel[d] == "" {
			t.Errorf("decision %s has no decisionLabel (views/action_text.go)", d)
		}
		if decisionHelp(a, d) == "" {
			t.Errorf("decision %s has no decisionHelp (views/action_text.go)", d)
		}
		if DecidedMessage(d, a) == DecidedMessage("", a) {
			t.Errorf("decision %s has no DecidedMessage of its own (views/action_text.go)", d)
		}
	}
	if len(decisionLabel) != len(record.Decisions) {
		t.Errorf("decisionLabel has %d decisions; record.Decisions has %d", len(decisionLabel), len(record.Decisions))
	}
}

// entryTypesWithoutNote are the entry types whose name says enough on the
// timeline. Every other entry type has an entryNote: a new type must be
// put in one or the other.
var entryTypesWithoutNote = []record.EntryType{record.TypeIntent, record.TypeHeartbeat, record.TypeSucceeded,
	record.TypeFailed, record.TypeCompensated, record.TypeNote, record.TypeLookupResult, record.TypeDecision}

// TestEveryEntryTypeIsWorded: each entry type either has a note on the
// timeline or is listed as needing none, never both; those the timeline
// warns about all have a note.
func TestEveryEntryTypeIsWorded(t *testing.T) {
	t.Parallel()
	plain := map[record.EntryType]bool{}
	for _, typ := range entryTypesWithoutNote {
		plain[typ] = true
	}
	for _, typ := range record.EntryTypes {
		_, noted := entryNote[typ]
		switch {
		case noted && plain[typ]:
			t.Errorf("entry type %s has an entryNote and is listed in entryTypesWithoutNote", typ)
		case !noted && !plain[typ]:
			t.Errorf("entry type %s has no entryNote (views/action_text.go) and is not in entryTypesWithoutNote", typ)
		case entryWarns(typ) && !noted:
			t.Errorf("entry type %s is warned about but has no entryNote", typ)
		}
	}
	if len(entryNote)+len(plain) != len(record.EntryTypes) {
		t.Errorf("entryNote has %d types and entryTypesWithoutNote %d; record.EntryTypes has %d",
			len(entryNote), len(plain), len(record.EntryTypes))
	}
}

// TestEveryAnswerHasWords: a lookup's answer is said in words, never as
// its wire value.
func TestEveryAnswerHasWords(t *testing.T) {
	t.Parallel()
	for _, a := range record.Answers {
		if answerWords[a] == "" {
			t.Errorf("answer %s has no answerWords (views/action_text.go)", a)
		}
	}
	if len(answerWords) != len(record.Answers) {
		t.Errorf("answerWords has %d answers; record.Answers has %d", len(answerWords), len(record.Answers))
	}
}

// TestEveryTriageAlertHasWords: the triage queue names each kind of alert
// it shows in words.
func TestEveryTriageAlertHasWords(t *testing.T) {
	t.Parallel()
	for _, typ := range services.TriageAlerts {
		if alertText(string(typ)) == string(typ) {
			t.Errorf("triage alert %s has no alertText (views/triage.templ)", typ)
		}
	}
}

// The triage page's "See every waiting action" link lists the statuses the
// queue counts as waiting: an action held for approval is waiting too.
func TestTriageWaitingListIsTheQueuesStatuses(t *testing.T) {
	u, err := url.Parse(triageWaitingList)
	if err != nil {
		t.Fatal(err)
	}
	got := u.Query()["status"]
	var want []string
	for _, s := range services.TriageStatuses {
		want = append(want, string(s))
	}
	if !slices.Equal(got, want) {
		t.Errorf("the link lists %v; the queue waits on %v", got, want)
	}
}

// TestEveryDecisionIsClassedForItsButton: each decision says whether its
// button is a danger button, so a new decision that ends an action or
// undoes an effect cannot look like a harmless one by default.
func TestEveryDecisionIsClassedForItsButton(t *testing.T) {
	t.Parallel()
	for _, d := range record.Decisions {
		if _, ok := decisionDanger[d]; !ok {
			t.Errorf("decision %s is not in decisionDanger (views/decision_panel.templ): say whether its button is a danger button", d)
		}
	}
	if len(decisionDanger) != len(record.Decisions) {
		t.Errorf("decisionDanger has %d decisions; record.Decisions has %d", len(decisionDanger), len(record.Decisions))
	}
}
