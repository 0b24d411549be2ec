package web_test

import (
	"context"
	"net/http"
	"net/url"
	"testing"

	"github.com/PuerkitoBio/goquery"
	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/accounts"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
)

// TestBulkTellsNotYoursFromGone: a bulk decision over ticked rows tells an
// action the user can see but may not decide (a viewer there) from one
// that is no longer there, in the count and in the result.
func TestBulkTellsNotYoursFromGone(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		te := newTeamsEnv(t, st)
		alice := te.operators["team-a"]
		require.NoError(t, accounts.New(st).Grant(context.Background(), userID(t, st, "oncall@team-a.example.com"), "team-b", services.RoleViewer))
		alice.get("/")
		gone := "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"
		ids := []string{te.ids["team-a"], te.ids["team-b"], gone}

		p := alice.post("/decisions/preview", url.Values{"scope": {"selected"}, "ids": ids, "decision": {"abandon"}, "reason": {"r"}})
		require.Equal(t, http.StatusOK, p.status, p.body)
		require.Equal(t, "1", p.testid("bulk-allowed").Text())
		require.Equal(t, "1 will be left alone: you may see it but not decide it (a viewer in its namespace)",
			flatText(p.doc.Find(`[data-testid="bulk-will-skip"] li[data-code="not_decidable"]`)))
		require.Equal(t, "1 will be left alone: it is no longer there",
			flatText(p.doc.Find(`[data-testid="bulk-will-skip"] li[data-code="not_found"]`)))

		p = alice.post("/decisions", url.Values{"scope": {"selected"}, "ids": ids, "decision": {"abandon"}, "reason": {"r"}, "max_count": {"1"}})
		require.Equal(t, http.StatusOK, p.status, p.body)
		require.Equal(t, "1", p.testid("bulk-applied").Text())
		rows := map[string]string{}
		p.testid("bulk-skipped-row").Each(func(_ int, s *goquery.Selection) {
			rows[s.AttrOr("data-action-id", "")] = s.AttrOr("data-code", "") + ": " + flatText(s)
		})
		require.Equal(t, map[string]string{
			te.ids["team-b"]: "not_decidable: refund:1 — you may see it but not decide it (a viewer in its namespace)",
			gone:             "not_found: " + gone + " — it is no longer there",
		}, rows)
		require.Equal(t, "timed_out", te.status(te.ids["team-b"]))
		require.Equal(t, "abandoned", te.status(te.ids["team-a"]))
	})
}
