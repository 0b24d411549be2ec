package web_test

import (
	"testing"

	"github.com/PuerkitoBio/goquery"
	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
)

// TestOperatorSeesLookups: triage shows the last lookup answer of each
// timed-out action, so an unkeyed retry is decided with evidence; the
// action page shows the lookups and the timeline what each one found.
func TestOperatorSeesLookups(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		d := newDetailEnv(t, st)
		email := d.start("email:welcome-7", "unkeyed", 1, `{"to":"ana@example.com"}`)
		refund := d.start("refund:order-8812", "keyed", 1, `{"amount":10}`)
		d.timeOut()
		for _, e := range []string{
			`{"key":"email:welcome-7","type":"lookup","attempt":1}`,
			`{"key":"email:welcome-7","type":"lookup_result","attempt":1,"answer":"not_happened","evidence":{"messages":0,"searched":"ana@example.com"}}`,
			`{"key":"refund:order-8812","type":"lookup","attempt":1}`,
			`{"key":"refund:order-8812","type":"lookup_result","attempt":1,"answer":"happened","external_ref":"re_8812","evidence":"<b>re_8812</b> settled"}`,
		} {
			m := d.entry(e)
			require.NotEqual(t, "rejected", m["outcome"], "%v", m)
		}

		// The unkeyed email stays for a person, with the answer beside it;
		// the refund was confirmed by its lookup and left the queue.
		p := d.op.get("/")
		rows := p.testid("triage-row")
		require.Equal(t, []string{email}, rowAttrs(rows, "data-action-id"))
		require.Equal(t, `provider says: not found — {"messages":0,"searched":"ana@example.com"} (just now) · a retry may duplicate it`,
			flatText(rows.First().Find(`[data-testid="triage-lookup"]`)))

		p = d.op.get("/actions/" + email)
		require.Equal(t, "1 of 3 for attempt 1", flatText(p.testid("reconciliation-lookups")))
		require.Contains(t, flatText(p.testid("reconciliation-answer")), "provider says: not found")

		// The refund's timeline: the lookup, its answer (escaped, as all
		// text) and the system entry of the change it made.
		p = d.op.get("/actions/" + refund)
		require.Equal(t, "confirmed", flatText(p.testid("action-status")))
		var types, summaries []string
		p.testid("timeline-entry").Each(func(_ int, s *goquery.Selection) {
			types = append(types, s.AttrOr("data-type", ""))
			summaries = append(summaries, flatText(s.Find(`[data-testid="entry-summary"]`)))
		})
		require.Equal(t, []string{"intent", "timed_out", "lookup", "lookup_result", "reconciled"}, types)
		require.Equal(t, "lookup lease of 1m0s", summaries[2])
		require.Equal(t, "provider says: it happened — <b>re_8812</b> settled", summaries[3])
		require.Equal(t, "provider says: it happened → confirmed, nothing runs again (lookup #4)", summaries[4])
		require.NotContains(t, p.body, "<b>re_8812</b>", "evidence is escaped")
	})
}
