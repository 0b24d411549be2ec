package client

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/arbiter-ledger/arbiter/services/record"
)

// TestSharedVectorsLookupAnswers: the answers a lookup gives are those of
// sdk/vectors.json.
func TestSharedVectorsLookupAnswers(t *testing.T) {
	raw, err := os.ReadFile("../sdk/vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		LookupAnswers struct {
			Values []Answer `json:"values"`
		} `json:"lookup_answers"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	want := []Answer{AnswerHappened, AnswerNotHappened, AnswerUnknown}
	if strings.Join(answerStrings(v.LookupAnswers.Values), ",") != strings.Join(answerStrings(want), ",") {
		t.Fatalf("vectors say %v, the SDK has %v", v.LookupAnswers.Values, want)
	}
}

func answerStrings(as []Answer) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = string(a)
	}
	return out
}

// The entry a lookup's answer becomes: a failed or nonsensical lookup is
// unknown with the error as evidence, and evidence too large to keep does
// not cost the answer.
func TestLookupResultEntry(t *testing.T) {
	for _, tc := range []struct {
		name     string
		ans      LookupAnswer
		err      error
		answer   Answer
		evidence string
		ref      string
		result   string
	}{
		{"happened", LookupAnswer{Answer: AnswerHappened, ExternalRef: "re_1", Result: map[string]string{"id": "re_1"}, Evidence: []string{"re_1"}},
			nil, AnswerHappened, `["re_1"]`, "re_1", `{"id":"re_1"}`},
		{"not happened keeps no ref or result", LookupAnswer{Answer: AnswerNotHappened, ExternalRef: "x", Result: 1},
			nil, AnswerNotHappened, ``, "", ""},
		{"an error", LookupAnswer{Answer: AnswerHappened}, errors.New("search API down"),
			AnswerUnknown, `{"lookup_error":"search API down"}`, "", ""},
		{"no answer", LookupAnswer{}, nil, AnswerUnknown,
			`{"lookup_error":"the lookup answered \"\", which is none of [happened not_happened unknown]"}`, "", ""},
		{"evidence too large", LookupAnswer{Answer: AnswerUnknown, Evidence: strings.Repeat("x", 70<<10)}, nil, AnswerUnknown,
			`"the evidence was 71682 bytes, over the 65536 the ledger keeps; it was not kept"`, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := lookupResult(Entry{Key: "k", Type: TypeLookupResult}, tc.ans, tc.err)
			if *e.Answer != tc.answer {
				t.Errorf("answer %q, want %q", *e.Answer, tc.answer)
			}
			if string(e.Evidence) != tc.evidence {
				t.Errorf("evidence %s, want %s", e.Evidence, tc.evidence)
			}
			ref := ""
			if e.ExternalRef != nil {
				ref = *e.ExternalRef
			}
			if ref != tc.ref {
				t.Errorf("external ref %q, want %q", ref, tc.ref)
			}
			if string(e.Result) != tc.result {
				t.Errorf("result %s, want %s", e.Result, tc.result)
			}
		})
	}
}

// When a worker asks about a timed-out attempt, from what the action
// carries (so that every worker, and one restarted, decides alike).
func TestLookupDue(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { t := now.Add(d); return &t }
	failed := func(ago time.Duration) *record.LookupAnswer {
		return &record.LookupAnswer{Attempt: 2, Answer: AnswerUnknown, At: now.Add(-ago), Said: `{"lookup_error":"503"}`}
	}
	w := NewWorker(New("http://127.0.0.1:1", "ak_x"), WorkerOptions{LookupRetry: 10 * time.Second})
	for _, tc := range []struct {
		name string
		rc   *record.Reconciliation
		due  bool
	}{
		{"never looked up", nil, true},
		{"an older attempt was", &record.Reconciliation{LookupAttempt: 1, Lookups: 3}, true},
		{"another lookup's lease is live", &record.Reconciliation{LookupAttempt: 2, Lookups: 1, LookupUntil: at(time.Second)}, false},
		{"a lease passed without an answer", &record.Reconciliation{LookupAttempt: 2, Lookups: 1, LookupUntil: at(-time.Second)}, true},
		{"the lookups are spent", &record.Reconciliation{LookupAttempt: 2, Lookups: 3, LastLookup: failed(time.Hour)}, false},
		{"the downstream said unknown", &record.Reconciliation{LookupAttempt: 2, Lookups: 1,
			LastLookup: &record.LookupAnswer{Attempt: 2, Answer: AnswerUnknown, At: now.Add(-time.Hour), Said: "cannot be searched"}}, false},
		{"not happened, left to a person", &record.Reconciliation{LookupAttempt: 2, Lookups: 1,
			LastLookup: &record.LookupAnswer{Attempt: 2, Answer: AnswerNotHappened, At: now.Add(-time.Hour)}}, false},
		{"failed once, retry not yet", &record.Reconciliation{LookupAttempt: 2, Lookups: 1, LastLookup: failed(9 * time.Second)}, false},
		{"failed once, retry due", &record.Reconciliation{LookupAttempt: 2, Lookups: 1, LastLookup: failed(10 * time.Second)}, true},
		{"failed twice, the pause doubled", &record.Reconciliation{LookupAttempt: 2, Lookups: 2, LastLookup: failed(19 * time.Second)}, false},
		{"failed twice, retry due", &record.Reconciliation{LookupAttempt: 2, Lookups: 2, LastLookup: failed(20 * time.Second)}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := Action{Status: StatusTimedOut, Attempt: 2, Reconciliation: tc.rc}
			if got := w.lookupDue(a, now); got != tc.due {
				t.Errorf("due %v, want %v", got, tc.due)
			}
		})
	}
}
