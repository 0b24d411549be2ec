package web_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
)

// postBatches sends entries in batches of size n and requires each accepted.
func postBatches(t *testing.T, e *env, agent string, entries []string, n int) {
	t.Helper()
	for len(entries) > 0 {
		m := min(n, len(entries))
		status, raw := e.doRaw("POST", "/v1/entries", agent, `{"entries":[`+strings.Join(entries[:m], ",")+`]}`)
		require.Equal(t, http.StatusOK, status, "%.300s", raw)
		entries = entries[m:]
	}
}

type timelinePage struct {
	Entries []struct {
		Seq int `json:"seq"`
	} `json:"entries"`
	NextCursor *string `json:"next_cursor"`
}

// readTimeline follows next_cursor from the first page to the last and
// returns every page and the size of the largest answer.
func readTimeline(t *testing.T, e *env, key, id, query string) ([]timelinePage, int) {
	t.Helper()
	var pages []timelinePage
	largest := 0
	cursor := ""
	for {
		path := "/v1/actions/" + id + "/entries?" + query
		if cursor != "" {
			path += "&cursor=" + url.QueryEscape(cursor)
		}
		status, raw := e.doRaw("GET", path, key, "")
		require.Equal(t, http.StatusOK, status, "%.300s", raw)
		largest = max(largest, len(raw))
		var p timelinePage
		require.NoError(t, json.Unmarshal(raw, &p))
		pages = append(pages, p)
		if p.NextCursor == nil {
			return pages, largest
		}
		require.Less(t, len(pages), 100, "pagination ends")
		cursor = *p.NextCursor
	}
}

func pageSeqs(pages []timelinePage) (lens []int, all []int) {
	for _, p := range pages {
		lens = append(lens, len(p.Entries))
		for _, en := range p.Entries {
			all = append(all, en.Seq)
		}
	}
	return lens, all
}

func upTo(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i + 1
	}
	return out
}

// TestTimelinePages: a timeline is answered oldest first in pages of at
// most limit entries (default and maximum 1,000), each with the cursor of
// the next; bad parameters are 400 invalid.
func TestTimelinePages(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		agent := e.key("shop", "agent", services.RoleAgent)
		reader := e.key("shop", "reader", services.RoleReader)
		status, m := e.do("POST", "/v1/entries", agent, `{"key":"long","type":"intent","tool":"t.x"}`)
		require.Equal(t, http.StatusCreated, status)
		id := m["action"].(map[string]any)["id"].(string)
		notes := make([]string, 2100)
		for i := range notes {
			notes[i] = fmt.Sprintf(`{"key":"long","type":"note","message":"note %d"}`, i)
		}
		postBatches(t, e, agent, notes, 500)

		pages, _ := readTimeline(t, e, reader, id, "")
		lens, all := pageSeqs(pages)
		require.Equal(t, []int{1000, 1000, 101}, lens)
		require.Equal(t, upTo(2101), all, "every entry once, oldest first")

		pages, _ = readTimeline(t, e, reader, id, "limit=700")
		lens, all = pageSeqs(pages)
		require.Equal(t, []int{700, 700, 700, 1}, lens)
		require.Equal(t, upTo(2101), all)

		status, m = e.do("GET", "/v1/actions/"+id+"/entries?limit=1000", reader, "")
		require.Equal(t, http.StatusOK, status)
		require.Len(t, m["entries"], 1000)

		for _, q := range []string{"limit=0", "limit=1001", "limit=x", "limit=", "cursor=zzz", "cursor=", "colour=red",
			"cursor=" + url.QueryEscape(*pages[0].NextCursor+"x")} {
			status, m := e.do("GET", "/v1/actions/"+id+"/entries?"+q, reader, "")
			require.Equal(t, http.StatusBadRequest, status, q)
			require.Equal(t, "invalid", errCode(m), q)
		}
		// Another namespace's action stays unknown, cursor or not.
		other := e.key("other", "reader", services.RoleReader)
		status, m = e.do("GET", "/v1/actions/"+id+"/entries?cursor="+url.QueryEscape(*pages[0].NextCursor), other, "")
		require.Equal(t, http.StatusNotFound, status)
		require.Equal(t, "not_found", errCode(m))
	})
}

// TestPagesAreBoundedByBytes: a timeline of large notes and a list of
// actions with large params are answered in pages of about
// services.MaxPageBytes, each continued by its next_cursor, whatever the
// limit.
func TestPagesAreBoundedByBytes(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		agent := e.key("shop", "agent", services.RoleAgent)
		big := strings.Repeat("x", 60_000)
		status, m := e.do("POST", "/v1/entries", agent, `{"key":"big","type":"intent","tool":"t.x"}`)
		require.Equal(t, http.StatusCreated, status)
		id := m["action"].(map[string]any)["id"].(string)
		notes := make([]string, 90)
		for i := range notes {
			notes[i] = `{"key":"big","type":"note","message":"` + big + `"}`
		}
		postBatches(t, e, agent, notes, 15)

		bound := services.MaxPageBytes + 256<<10
		pages, largest := readTimeline(t, e, agent, id, "")
		lens, all := pageSeqs(pages)
		require.Greater(t, len(pages), 1, "pages: %v", lens)
		require.Less(t, largest, bound)
		require.Equal(t, upTo(91), all)

		intents := make([]string, 90)
		for i := range intents {
			intents[i] = fmt.Sprintf(`{"key":"p%d","type":"intent","tool":"t.x","params":{"blob":"%s"}}`, i, big)
		}
		postBatches(t, e, agent, intents, 15)
		seen := map[string]bool{}
		cursor, n := "", 0
		for {
			path := "/v1/actions?tool=t.x&limit=500"
			if cursor != "" {
				path += "&cursor=" + url.QueryEscape(cursor)
			}
			status, raw := e.doRaw("GET", path, agent, "")
			require.Equal(t, http.StatusOK, status)
			require.Less(t, len(raw), bound)
			var p struct {
				Actions []struct {
					Key string `json:"key"`
				} `json:"actions"`
				NextCursor *string `json:"next_cursor"`
			}
			require.NoError(t, json.Unmarshal(raw, &p))
			for _, a := range p.Actions {
				require.False(t, seen[a.Key], a.Key)
				seen[a.Key] = true
			}
			n++
			if p.NextCursor == nil {
				break
			}
			cursor = *p.NextCursor
		}
		require.Len(t, seen, 91)
		require.Greater(t, n, 1)
	})
}
