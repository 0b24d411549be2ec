package web_test

import (
	"fmt"
	"net/http"
	"strconv"
	"testing"

	"github.com/PuerkitoBio/goquery"
	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
)

func shownSeqs(s *goquery.Selection) []int {
	var out []int
	s.Each(func(_ int, e *goquery.Selection) {
		n, _ := strconv.Atoi(e.AttrOr("data-seq", ""))
		out = append(out, n)
	})
	return out
}

func seqRange(from, to int) []int {
	var out []int
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

// TestActionPageTimelineInPages: the action page shows the newest 100
// entries of a long timeline (oldest first), with an "Older entries" link
// that loads the page before in its place (htmx) or on a page of its own,
// down to the first entry.
func TestActionPageTimelineInPages(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		agent := e.key("shop", "agent", services.RoleAgent)
		status, m := e.do("POST", "/v1/entries", agent, `{"key":"long","type":"intent","tool":"t.x"}`)
		require.Equal(t, http.StatusCreated, status)
		id := m["action"].(map[string]any)["id"].(string)
		notes := make([]string, 249)
		for i := range notes {
			notes[i] = fmt.Sprintf(`{"key":"long","type":"note","message":"note %d"}`, i)
		}
		postBatches(t, e, agent, notes, 500)
		b := e.browser()
		b.signIn("ops@example.com", e.user("ops@example.com", services.RoleOperator))

		p := b.get("/actions/" + id)
		require.Equal(t, http.StatusOK, p.status)
		require.Equal(t, seqRange(151, 250), shownSeqs(p.testid("timeline-entry")))
		older := p.testid("timeline-older-link")
		require.Equal(t, 1, older.Length())
		href := "/actions/" + id + "/timeline?before=151"
		require.Equal(t, href, older.AttrOr("href", ""))
		require.Equal(t, href, older.AttrOr("hx-get", ""))
		seen := p.doc.Find(`input[name=seen_seq]`)
		require.NotZero(t, seen.Length())
		require.Equal(t, "250", seen.First().AttrOr("value", ""), "the panel names the newest entry")

		// Without JavaScript: a page of its own.
		p = b.get(href)
		require.Equal(t, http.StatusOK, p.status)
		require.Equal(t, seqRange(51, 150), shownSeqs(p.testid("timeline-entry")))
		require.Equal(t, "/actions/"+id+"/timeline?before=51", p.testid("timeline-older-link").AttrOr("href", ""))
		require.Equal(t, 1, p.testid("timeline-newest").Length())
		require.Equal(t, 1, p.doc.Find("h1").Length(), "a page of its own has its heading")

		// With htmx: the page alone, put in the link's place.
		req, err := http.NewRequest("GET", e.srv.URL+"/actions/"+id+"/timeline?before=51", nil)
		require.NoError(t, err)
		req.Header.Set("HX-Request", "true")
		p = b.do(req)
		require.Equal(t, http.StatusOK, p.status)
		require.Equal(t, seqRange(1, 50), shownSeqs(p.testid("timeline-entry")))
		require.Zero(t, p.testid("timeline-older").Length(), "the first entry is shown: nothing older")
		require.Zero(t, p.doc.Find("h1, h2, nav").Length(), "a fragment, not a page")
		require.Contains(t, p.header.Values("Vary"), "HX-Request")

		for _, bad := range []string{"0", "x", "-3", ""} {
			p = b.get("/actions/" + id + "/timeline?before=" + bad)
			require.Equal(t, http.StatusBadRequest, p.status, bad)
		}
	})
}
