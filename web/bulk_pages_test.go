package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"
	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
)

// formValues reads a form's fields as the browser would send them.
func formValues(s *goquery.Selection) url.Values {
	v := url.Values{}
	s.Find("input").Each(func(_ int, in *goquery.Selection) {
		name, _ := in.Attr("name")
		value, _ := in.Attr("value")
		typ, _ := in.Attr("type")
		if name == "" || ((typ == "checkbox" || typ == "radio") && in.AttrOr("checked", "-") == "-") {
			return
		}
		v.Add(name, value)
	})
	return v
}

// TestBulkDecisionWithoutJavaScript: on triage an operator ticks rows,
// counts, confirms, and each action is decided; every step is a page and a
// plain form.
func TestBulkDecisionWithoutJavaScript(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		d := newDesk(t, st)
		var ids []string
		for _, k := range []string{"8812", "8813", "8814"} {
			ids = append(ids, d.entry(`{"key":"refund:order-`+k+`","type":"intent","tool":"payments.refund","effect":"keyed","timeout":1}`))
		}
		d.sweepUntil(3)
		pw := d.user("oncall@example.com", services.RoleOperator)
		b := d.browser()
		b.signIn("oncall@example.com", pw)

		p := b.get("/")
		require.Equal(t, http.StatusOK, p.status)
		form := p.testid("bulk-form")
		require.Equal(t, 1, form.Length())
		require.Equal(t, "/decisions/preview", form.AttrOr("action", ""))
		require.Equal(t, "post", form.AttrOr("method", ""))
		require.NotEmpty(t, form.Find(`input[name=csrf_token]`).AttrOr("value", ""))
		require.Equal(t, "Every waiting action (timed_out, retry_requested, compensation_requested, awaiting_approval): 3 now",
			p.testid("bulk-all-label").Text())
		for _, id := range ids {
			box := p.doc.Find(`[data-testid="triage-row"][data-action-id="` + id + `"] [data-testid="pick"]`)
			require.Equal(t, 1, box.Length(), "a checkbox on the row of %s", id)
			require.Equal(t, "bulk-form", box.AttrOr("form", ""), "the checkbox belongs to the bar's form")
			require.Equal(t, id, box.AttrOr("value", ""))
		}

		// Ticking two rows and counting writes nothing and shows the count.
		v := formValues(form)
		v.Set("decision", "abandon")
		v.Set("reason", "PSP outage: none of these went out")
		v["ids"] = ids[:2]
		before := ledgerWrites(t, st)
		p = b.post("/decisions/preview", v)
		require.Equal(t, http.StatusOK, p.status, p.body)
		require.Equal(t, "2", p.testid("bulk-allowed").Text())
		require.Equal(t, "2", p.testid("bulk-matched").Text())
		require.Equal(t, 2, p.testid("bulk-sample-row").Length())
		require.Equal(t, "PSP outage: none of these went out", p.testid("bulk-confirm-reason").Text())
		require.Equal(t, before, ledgerWrites(t, st), "counting writes nothing")
		confirm := p.testid("bulk-confirm-form")
		require.Equal(t, "/decisions", confirm.AttrOr("action", ""))
		cv := formValues(confirm)
		require.Equal(t, "2", cv.Get("max_count"))
		require.ElementsMatch(t, ids[:2], cv["ids"])
		require.Contains(t, p.testid("bulk-confirm").Text(), "Abandon: 2 actions")

		// Confirming decides each of them.
		p = b.post("/decisions", cv)
		require.Equal(t, http.StatusOK, p.status, p.body)
		require.Equal(t, "2", p.testid("bulk-applied").Text())
		require.Equal(t, 0, p.testid("bulk-skipped").Length())
		for i, id := range ids {
			status, m := d.do("GET", "/v1/actions/"+id, d.operator, "")
			require.Equal(t, 200, status)
			want := "abandoned"
			if i == 2 {
				want = "timed_out"
			}
			require.Equal(t, want, m["status"], "%s", id)
		}
		status, m := d.do("GET", "/v1/actions/"+ids[0]+"/entries", d.operator, "")
		require.Equal(t, 200, status)
		es := m["entries"].([]any)
		last := es[len(es)-1].(map[string]any)
		require.Equal(t, "decision", last["type"])
		require.Equal(t, map[string]any{"kind": "operator", "name": "oncall@example.com", "via": "dashboard"}, last["actor"])
		require.Equal(t, "PSP outage: none of these went out", last["payload"].(map[string]any)["reason"])

		// The same confirmation again: both are left alone now.
		p = b.post("/decisions", cv)
		require.Equal(t, http.StatusOK, p.status, p.body)
		require.Equal(t, "0", p.testid("bulk-applied").Text())
		require.Equal(t, 2, p.doc.Find(`[data-testid="bulk-skipped-row"][data-code="invalid_transition"]`).Length())
		require.Contains(t, p.testid("bulk-skipped").Text(), "refund:order-8812")

		// Every waiting action: the one left.
		all := url.Values{"scope": {"all"}, "f_status": {"timed_out", "retry_requested"}, "decision": {"confirm"},
			"reason": {"seen in the PSP"}, "back": {"/"}}
		p = b.post("/decisions/preview", all)
		require.Equal(t, http.StatusOK, p.status, p.body)
		require.Equal(t, "1", p.testid("bulk-allowed").Text())
		require.Equal(t, ids[2], p.testid("bulk-sample-row").AttrOr("data-action-id", ""))
		cv = formValues(p.testid("bulk-confirm-form"))
		require.Equal(t, "all", cv.Get("scope"))
		require.Equal(t, []string{"timed_out", "retry_requested"}, cv["f_status"])
		require.Empty(t, cv["ids"])

		// A new timed-out action appears before the confirmation: more are
		// allowed than were confirmed, so nothing is written.
		d.entry(`{"key":"refund:order-8815","type":"intent","tool":"payments.refund","effect":"keyed","timeout":1}`)
		d.sweepUntil(1)
		before = ledgerWrites(t, st)
		p = b.post("/decisions", cv)
		require.Equal(t, http.StatusConflict, p.status, p.body)
		require.Contains(t, p.testid("bulk-error").Text(), "Nothing was written: more actions can take this decision now than the 1 you confirmed")
		require.Equal(t, before, ledgerWrites(t, st))
	})
}

// TestBulkDecisionRefusals: what the bulk forms refuse, each with a message
// on the page and nothing written.
func TestBulkDecisionRefusals(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		d := newDesk(t, st)
		id := d.entry(`{"key":"refund:order-8812","type":"intent","tool":"payments.refund","effect":"keyed","timeout":1}`)
		email := d.entry(`{"key":"email:1","type":"intent","tool":"email.send","effect":"unkeyed","timeout":1}`)
		d.sweepUntil(2)
		pw := d.user("oncall@example.com", services.RoleOperator)
		b := d.browser()
		b.signIn("oncall@example.com", pw)
		before := ledgerWrites(t, st)
		for _, c := range []struct {
			name   string
			v      url.Values
			status int
			msg    string
		}{
			{"no row ticked", url.Values{"scope": {"selected"}, "decision": {"abandon"}, "reason": {"r"}}, 400, "Tick at least one row"},
			{"no reason", url.Values{"scope": {"selected"}, "ids": {id}, "decision": {"abandon"}}, 400, `"reason" is required`},
			{"no decision", url.Values{"scope": {"selected"}, "ids": {id}, "reason": {"r"}}, 400, `"decision" is required`},
			{"a malformed id", url.Values{"scope": {"selected"}, "ids": {"order-8812"}, "decision": {"abandon"}, "reason": {"r"}}, 400, "is not an action id"},
			{"a filter without criteria", url.Values{"scope": {"all"}, "decision": {"abandon"}, "reason": {"r"}}, 400, "must name at least one criterion"},
			{"a time this page did not write", url.Values{"scope": {"all"}, "f_since": {"yesterday"}, "decision": {"abandon"}, "reason": {"r"}}, 400, "not ones this page wrote"},
		} {
			t.Run(c.name, func(t *testing.T) {
				p := b.post("/decisions/preview", c.v)
				require.Equal(t, c.status, p.status, p.body)
				require.Contains(t, p.testid("bulk-error").Text(), c.msg)
				require.Equal(t, "/", p.testid("bulk-back").AttrOr("href", ""))
				require.Equal(t, before, ledgerWrites(t, st))
			})
		}

		// An unkeyed retry without the acknowledgement is counted as left
		// alone, and says why.
		p := b.post("/decisions/preview", url.Values{"scope": {"selected"}, "ids": {id, email}, "decision": {"retry"}, "reason": {"r"}})
		require.Equal(t, http.StatusOK, p.status, p.body)
		require.Equal(t, "1", p.testid("bulk-allowed").Text())
		require.Contains(t, p.doc.Find(`[data-testid="bulk-will-skip"] li[data-code="duplicate_risk_unacknowledged"]`).Text(),
			"1 will be left alone: unkeyed: a retry needs the duplicate-risk acknowledgement")
		p = b.post("/decisions/preview", url.Values{"scope": {"selected"}, "ids": {id, email}, "decision": {"retry"}, "reason": {"r"},
			"acknowledge_duplicate_risk": {"on"}})
		require.Equal(t, "2", p.testid("bulk-allowed").Text())
		require.Equal(t, "true", formValues(p.testid("bulk-confirm-form")).Get("acknowledge_duplicate_risk"))

		// Without the CSRF token, or from a viewer: refused.
		p = b.post("/decisions", url.Values{"csrf_token": {"forged"}, "scope": {"selected"}, "ids": {id}, "decision": {"abandon"},
			"reason": {"r"}, "max_count": {"1"}})
		require.Equal(t, http.StatusForbidden, p.status)
		vpw := d.user("viewer@example.com", services.RoleViewer)
		viewer := d.browser()
		viewer.signIn("viewer@example.com", vpw)
		page := viewer.get("/")
		require.Equal(t, 0, page.testid("bulk-form").Length(), "viewers get no bulk bar")
		require.Equal(t, 0, page.testid("pick").Length(), "nor checkboxes")
		p = viewer.post("/decisions", url.Values{"scope": {"selected"}, "ids": {id}, "decision": {"abandon"}, "reason": {"r"}, "max_count": {"1"}})
		require.Equal(t, http.StatusForbidden, p.status)
		require.Equal(t, before, ledgerWrites(t, st))

		// No state change over GET.
		p = b.get("/decisions")
		require.Equal(t, http.StatusMethodNotAllowed, p.status)
	})
}

// TestBulkBarOnTheActionList: the list offers its filter as "every matching
// action", with a relative range frozen to a time.
func TestBulkBarOnTheActionList(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		d := newDesk(t, st)
		for _, k := range []string{"1", "2", "3"} {
			d.entry(`{"key":"refund:` + k + `","type":"intent","tool":"payments.refund","effect":"keyed"}`)
			d.entry(`{"key":"refund:` + k + `","type":"failed","attempt":1,"error":"declined"}`)
		}
		pw := d.user("oncall@example.com", services.RoleOperator)
		b := d.browser()
		b.signIn("oncall@example.com", pw)

		p := b.get("/actions")
		require.Equal(t, 1, p.testid("bulk-form").Length())
		require.Equal(t, 0, p.testid("bulk-scope-all").Length(), "no filter: no \"every matching action\"")
		require.Equal(t, 3, p.testid("pick").Length())

		p = b.get("/actions?status=failed&tool=payments.refund&range=day")
		require.Equal(t, "Every action matching this filter: 3", p.testid("bulk-all-label").Text())
		v := formValues(p.testid("bulk-form"))
		require.Equal(t, []string{"failed"}, v["f_status"])
		require.Equal(t, "payments.refund", v.Get("f_tool"))
		require.NotEmpty(t, v.Get("f_since"), "the range is frozen to a time")
		require.Equal(t, "/actions?status=failed&tool=payments.refund&range=day", v.Get("back"))
		v.Set("scope", "all")
		v.Set("decision", "abandon")
		v.Set("reason", "declined cards: the customers were told")
		p = b.post("/decisions/preview", v)
		require.Equal(t, http.StatusOK, p.status, p.body)
		require.Equal(t, "3", p.testid("bulk-allowed").Text())
		p = b.post("/decisions", formValues(p.testid("bulk-confirm-form")))
		require.Equal(t, http.StatusOK, p.status, p.body)
		require.Equal(t, "3", p.testid("bulk-applied").Text())
		require.Equal(t, "/actions?status=failed&tool=payments.refund&range=day", p.testid("bulk-back").AttrOr("href", ""))
		p = b.get("/actions?status=abandoned")
		require.Equal(t, 3, p.testid("action-row").Length())
		require.True(t, strings.Contains(p.body, "refund:2"))
	})
}
