package views

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services/record"
)

// TestTimelineSaysWhatEachIntentAndDecisionWasAnswered: an intent after a
// compensate decision was answered compensate (the agent undid the effect,
// nothing ran again), not "proceed"; a retry's intent ran a new attempt;
// each decision says what it did to the action.
func TestTimelineSaysWhatEachIntentAndDecisionWasAnswered(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	one, two := 1, 2
	at := func(seq int) time.Time { return now.Add(time.Duration(seq-10) * time.Minute) }
	intent := func(seq int, attempt *int) *record.Entry {
		return &record.Entry{Seq: seq, Type: record.TypeIntent, Attempt: attempt, Actor: record.Actor{Kind: record.ActorAgent, Name: "bot"},
			Payload: []byte(`{"tool":"payments.refund","timeout":300}`), RecordedAt: at(seq)}
	}
	decision := func(seq int, d record.Decision) *record.Entry {
		return &record.Entry{Seq: seq, Type: record.TypeDecision, Actor: record.Actor{Kind: record.ActorOperator, Name: "ops@example.com"},
			Payload: []byte(`{"decision":"` + string(d) + `","reason":"checked"}`), RecordedAt: at(seq)}
	}
	entries := []*record.Entry{
		intent(1, &one),
		{Seq: 2, Type: record.TypeTimedOut, Attempt: &one, Actor: record.Actor{Kind: record.ActorSystem, Name: "sweeper"}, Payload: []byte(`{}`), RecordedAt: at(2)},
		decision(3, record.DecisionRetry),
		intent(4, &two),
		{Seq: 5, Type: record.TypeSucceeded, Attempt: &two, Actor: record.Actor{Kind: record.ActorAgent, Name: "bot"}, Payload: []byte(`{}`), RecordedAt: at(5)},
		decision(6, record.DecisionCompensate),
		intent(7, &two),
		{Seq: 8, Type: record.TypeCompensationFailed, Attempt: &two, Actor: record.Actor{Kind: record.ActorAgent, Name: "bot"}, Payload: []byte(`{"error":"psp down"}`), RecordedAt: at(8)},
		intent(9, &two),
		decision(10, record.DecisionMarkCompensated),
	}
	a := &record.Action{ID: "a1", Namespace: "payments", Key: "refund:1", Tool: "payments.refund", Effect: record.EffectKeyed,
		Status: record.StatusCompensated, Attempt: 2, Version: 9}
	var b bytes.Buffer
	require.NoError(t, ActionTimeline(ActionView{Action: a, Entries: entries, Now: now}).Render(context.Background(), &b))
	doc, err := goquery.NewDocumentFromReader(&b)
	require.NoError(t, err)
	summary := func(seq string) string {
		return strings.Join(strings.Fields(doc.Find(`[data-seq="`+seq+`"] [data-testid=entry-summary]`).Text()), " ")
	}
	answer := func(seq string) string {
		return strings.Join(strings.Fields(doc.Find(`[data-seq="`+seq+`"] [data-testid=entry-decision-answer]`).Text()), " ")
	}
	require.Equal(t, "proceed: payments.refund runs as attempt 1", summary("1"))
	require.Equal(t, "proceed: payments.refund runs again as attempt 2, with the same key", summary("4"))
	for _, seq := range []string{"7", "9"} {
		require.Equal(t, "compensate: the agent undoes attempt 2 of payments.refund; nothing runs again", summary(seq))
		require.NotContains(t, summary(seq), "proceed")
	}
	require.Contains(t, answer("3"), "retry requested: the agent's next intent with this key is answered proceed")
	require.Contains(t, answer("6"), "compensation requested: the agent's next intent with this key is answered compensate")
	require.Contains(t, answer("10"), "compensated")
	require.Equal(t, "Decision: retry", strings.TrimSpace(doc.Find(`[data-seq="3"] [data-testid=entry-decision]`).Text()), "the decision line is unchanged")
}

// TestDecisionAnswers: every decision's timeline line says what it did;
// an approval counts the yeses so far.
func TestDecisionAnswers(t *testing.T) {
	approve := func(seq int) *record.Entry {
		return &record.Entry{Seq: seq, Type: record.TypeDecision, Payload: []byte(`{"decision":"approve","reason":""}`)}
	}
	held := &record.Action{Status: record.StatusApproved, Approval: &record.Approval{Required: 2}}
	v := ActionView{Action: held, Entries: []*record.Entry{approve(2), approve(3)}}
	require.Equal(t, "approval counted: 1 of 2; nothing runs until enough people approve", decisionAnswerText(v, v.Entries[0]))
	require.Equal(t, "approved: 2 of 2; the agent's next intent with this key runs attempt 1", decisionAnswerText(v, v.Entries[1]))
	for _, d := range record.Decisions {
		e := &record.Entry{Seq: 1, Type: record.TypeDecision, Payload: []byte(`{"decision":"` + string(d) + `","reason":"x"}`)}
		require.NotEmpty(t, decisionAnswerText(ActionView{Action: held, Entries: []*record.Entry{e}}, e), d)
	}
}
