package web_test

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/arbiter-ledger/arbiter/services/record"

	"github.com/PuerkitoBio/goquery"
	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
)

// listKeys returns the keys of the listed actions, in page order.
func listKeys(p page) []string {
	var out []string
	for _, n := range p.testid("row-key").Nodes {
		out = append(out, n.FirstChild.Data)
	}
	return out
}

func TestActionListFilters(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		shop := newQueueEnv(t, st, "shop")
		shop.intent("refund-1", "payments.refund", "order-1", 60)
		shop.send(`{"key":"refund-1","type":"succeeded","attempt":1}`)
		shop.intent("charge-1", "payments.charge", "order-2", 60)
		shop.intent(hostileKey, "payments.refund", hostileRef, 60)
		lab := &queueEnv{env: shop.env, agent: shop.key("lab", "lab-bot", services.RoleAgent)}
		lab.intent("run-1", "lab.run", "exp-1", 60)

		b := shop.browser()
		b.signIn("viewer@example.com", shop.user("viewer@example.com", services.RoleViewer))

		p := b.get("/actions")
		require.Equal(t, http.StatusOK, p.status)
		require.Equal(t, []string{"run-1", hostileKey, "charge-1", "refund-1"}, listKeys(p), "newest first")
		require.Zero(t, p.testid("pager").Length(), "one page needs no pager")
		var options []string
		p.testid("filter-namespace").Find("option").Each(func(_ int, s *goquery.Selection) {
			options = append(options, s.AttrOr("value", "?"))
		})
		require.Equal(t, []string{"", "lab", "shop"}, options)

		row := p.testid("action-row").Eq(2)
		require.Equal(t, "shop", row.Find(`[data-testid="row-namespace"]`).Text())
		require.Equal(t, "payments.charge", row.Find(`[data-testid="row-tool"]`).Text())
		require.Equal(t, "keyed", row.Find(`[data-testid="row-effect"]`).Text())
		require.Equal(t, "in_progress", row.Find(`[data-testid="row-status"]`).Text())
		require.True(t, row.Find(`[data-testid="row-status"]`).HasClass("status-in_progress"))
		require.Equal(t, "1", row.Find(`[data-testid="row-attempt"]`).Text())
		require.Equal(t, "refund-bot", row.Find(`[data-testid="row-agent"]`).Text())
		require.Equal(t, "order-2", row.Find(`[data-testid="row-reference"]`).Text())
		require.Equal(t, "/actions/"+row.AttrOr("data-action-id", "?"), row.Find(`[data-testid="row-key"]`).AttrOr("href", ""))
		_, err := time.Parse(time.RFC3339, row.Find(`[data-testid="row-created"] time`).AttrOr("datetime", ""))
		require.NoError(t, err)

		require.Equal(t, hostileRef, p.testid("action-row").Eq(1).Find(`[data-testid="row-reference"]`).Text())
		require.NotContains(t, p.body, "<script>alert(1)")
		require.NotContains(t, p.body, "<img src=x")
		require.Empty(t, p.doc.Find("img").Nodes)

		anHourAgo := time.Now().UTC().Add(-time.Hour).Format("2006-01-02T15:04")
		inAnHour := time.Now().UTC().Add(time.Hour).Format("2006-01-02T15:04")
		cases := []struct {
			query string
			want  []string
		}{
			{"status=succeeded", []string{"refund-1"}},
			{"status=succeeded&status=in_progress&namespace=shop", []string{hostileKey, "charge-1", "refund-1"}},
			{"status=timed_out", nil},
			{"tool=payments.refund", []string{hostileKey, "refund-1"}},
			{"namespace=lab", []string{"run-1"}},
			{"agent=lab-bot", []string{"run-1"}},
			{"q=charge-1", []string{"charge-1"}},
			{"q=order-1", []string{"refund-1"}},
			{"q=" + url.QueryEscape(hostileKey), []string{hostileKey}},
			{"since=" + anHourAgo + "&until=" + inAnHour + "&tool=lab.run", []string{"run-1"}},
			{"since=" + inAnHour, nil},
			{"until=" + anHourAgo, nil},
			{"range=hour&namespace=lab", []string{"run-1"}},
			{"namespace=unknown", nil},
		}
		for _, tc := range cases {
			p := b.get("/actions?" + tc.query)
			require.Equal(t, http.StatusOK, p.status, tc.query)
			require.Equal(t, tc.want, listKeys(p), tc.query)
			require.Equal(t, len(tc.want) == 0, p.testid("list-empty").Length() == 1, tc.query)
		}

		// The form shows the filter the URL holds.
		p = b.get("/actions?namespace=shop&status=succeeded&status=failed&tool=payments.refund&agent=refund-bot&q=order-1" +
			"&since=2026-01-02T03:04&until=2036-01-02T03:04:05Z&range=day")
		require.Equal(t, http.StatusOK, p.status)
		form := p.testid("list-filters")
		require.Equal(t, "get", form.AttrOr("method", ""))
		require.Equal(t, "shop", form.Find(`select[name=namespace] option[selected]`).AttrOr("value", ""))
		var checked []string
		form.Find(`input[name=status][checked]`).Each(func(_ int, s *goquery.Selection) {
			checked = append(checked, s.AttrOr("value", ""))
		})
		require.Equal(t, []string{"succeeded", "failed"}, checked)
		require.Len(t, form.Find(`input[name=status]`).Nodes, len(record.Statuses))
		for name, want := range map[string]string{"tool": "payments.refund", "agent": "refund-bot", "q": "order-1",
			"since": "2026-01-02T03:04:00", "until": "2036-01-02T03:04:05"} {
			require.Equal(t, want, form.Find(`input[name=`+name+`]`).AttrOr("value", "?"), name)
		}
		require.Equal(t, "day", form.Find(`select[name=range] option[selected]`).AttrOr("value", ""))
		require.Equal(t, []string{"refund-1"}, listKeys(p))
	})
}

func TestActionListPages(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		q := newQueueEnv(t, st, "shop")
		var want []string
		for _, k := range []string{"a", "b", "c", "d", "e"} {
			q.intent(k, "payments.refund", "", 60)
			want = append([]string{k}, want...)
		}
		other := &queueEnv{env: q.env, agent: q.key("lab", "lab-bot", services.RoleAgent)}
		other.intent("elsewhere", "lab.run", "", 60)
		b := q.browser()
		b.signIn("ops@example.com", q.user("ops@example.com", services.RoleOperator))

		var got []string
		path := "/actions?namespace=shop&limit=2"
		for i := 0; path != ""; i++ {
			require.Less(t, i, 5, "pagination must end")
			p := b.get(path)
			require.Equal(t, http.StatusOK, p.status, path)
			got = append(got, listKeys(p)...)
			first := p.testid("first-page")
			if i == 0 {
				require.Zero(t, first.Length(), "the first page has no first-page link")
			} else {
				require.Equal(t, "/actions?limit=2&namespace=shop", first.AttrOr("href", ""))
			}
			path = p.testid("next-page").AttrOr("href", "")
			if path != "" {
				u, err := url.Parse(path)
				require.NoError(t, err)
				require.Equal(t, "shop", u.Query().Get("namespace"), "the filter carries over")
				require.Equal(t, "2", u.Query().Get("limit"))
				require.NotEmpty(t, u.Query().Get("cursor"))
				require.Equal(t, "2", p.testid("list-filters").Find(`input[name=limit]`).AttrOr("value", ""))
			}
		}
		require.Equal(t, want, got)
	})
}

func TestActionListRefusesBadFilters(t *testing.T) {
	t.Parallel()
	e := newEnv(t, dbtest.Open(t, services.SQLite))
	b := e.browser()
	b.signIn("ops@example.com", e.user("ops@example.com", services.RoleOperator))
	cases := []struct{ query, message string }{
		{"since=yesterday", `Since "yesterday" is not a time`},
		{"until=2026-13-01T00:00", `Until "2026-13-01T00:00" is not a time`},
		{"status=bogus", `unknown status "bogus"`},
		{"status=succeeded,%3Cscript%3E", `unknown status "<script>"`},
		{"range=month", `unknown time range "month"`},
		{"since=2026-02-01T00:00&until=2026-01-01T00:00", "Since must be before Until"},
		{"limit=0", "limit must be a number from 1 to 500"},
		{"limit=many", "limit must be a number from 1 to 500"},
		{"cursor=nonsense", "cursor"},
	}
	for _, tc := range cases {
		p := b.get("/actions?" + tc.query)
		require.Equal(t, http.StatusBadRequest, p.status, tc.query)
		require.Contains(t, p.testid("list-error").Text(), tc.message, tc.query)
		require.Equal(t, 1, p.testid("list-filters").Length(), "the form stays to fix the filter: %s", tc.query)
		require.Zero(t, p.testid("list-results").Length(), tc.query)
		require.NotContains(t, p.body, "<script>", tc.query)
	}
	p := b.get("/actions?since=yesterday&tool=payments.refund")
	require.Equal(t, "yesterday", p.testid("filter-since").AttrOr("value", ""), "a refused value is shown as typed")
	require.Equal(t, "payments.refund", p.testid("filter-tool").AttrOr("value", ""))
	require.True(t, slices.Contains(strings.Fields(p.testid("list-error").AttrOr("class", "")), "error"))
}

// TestActionListRefusesBadFiltersOutsideItsScope: a bad filter is refused
// also where the key sees nothing (another namespace), not answered with an
// empty page.
func TestActionListRefusesBadFiltersOutsideItsScope(t *testing.T) {
	t.Parallel()
	e := newEnv(t, dbtest.Open(t, services.SQLite))
	agent := e.key("payments", "bot", services.RoleAgent)
	for _, q := range []string{"status=bogus", "cursor=nonsense"} {
		status, m := e.do("GET", "/v1/actions?namespace=elsewhere&"+q, agent, "")
		require.Equal(t, http.StatusBadRequest, status, "%s: %v", q, m)
		require.Equal(t, "invalid", errCode(m), q)
	}
	status, m := e.do("GET", "/v1/actions?namespace=elsewhere", agent, "")
	require.Equal(t, http.StatusOK, status, "%v", m)
	require.Empty(t, m["actions"])
}
