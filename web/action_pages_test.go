package web_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/arbiter-ledger/arbiter/services/record"

	"github.com/PuerkitoBio/goquery"
	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
	"github.com/arbiter-ledger/arbiter/views"
)

// detailEnv is a server with an agent key in namespace payments and a
// signed-in operator.
type detailEnv struct {
	*env
	agent string
	op    *browser
}

func newDetailEnv(t *testing.T, st *services.Store) *detailEnv {
	e := newEnv(t, st)
	pw := e.user("ops@example.com", services.RoleOperator)
	b := e.browser()
	b.signIn("ops@example.com", pw)
	return &detailEnv{env: e, agent: e.key("payments", "bot", services.RoleAgent), op: b}
}

// entry records one entry as the agent and returns the result.
func (d *detailEnv) entry(body string) map[string]any {
	d.t.Helper()
	status, m := d.do("POST", "/v1/entries", d.agent, body)
	require.Less(d.t, status, 500, "%v", m)
	return m
}

// start records an intent for key and returns the action's id.
func (d *detailEnv) start(key, effect string, timeout int, params string) string {
	d.t.Helper()
	m := d.entry(fmt.Sprintf(`{"key":%q,"type":"intent","tool":"payments.refund","effect":%q,"timeout":%d,"params":%s}`,
		key, effect, timeout, params))
	require.Equal(d.t, "proceed", m["outcome"], "%v", m)
	return m["action"].(map[string]any)["id"].(string)
}

// timeOut lets the leases of actions started with timeout 1 pass and sweeps.
func (d *detailEnv) timeOut() {
	d.t.Helper()
	time.Sleep(1100 * time.Millisecond)
	_, err := services.NewLedger(d.st, services.LedgerConfig{}).Sweep(context.Background())
	require.NoError(d.t, err)
}

// apiStatus reads an action's status and version through the API.
func (d *detailEnv) apiStatus(id string) (string, int) {
	d.t.Helper()
	status, m := d.do("GET", "/v1/actions/"+id, d.agent, "")
	require.Equal(d.t, http.StatusOK, status)
	return m["status"].(string), int(m["version"].(float64))
}

func (d *detailEnv) entryCount(id string) int {
	d.t.Helper()
	_, m := d.do("GET", "/v1/actions/"+id+"/entries", d.agent, "")
	return len(m["entries"].([]any))
}

// formFields reads the hidden fields of the form for decision dec on a page.
func detailForm(t *testing.T, p page, dec string) url.Values {
	t.Helper()
	form := p.testid("decision-form-" + dec)
	require.Equal(t, 1, form.Length(), "the panel offers %s", dec)
	v := url.Values{}
	form.Find(`input[type=hidden]`).Each(func(_ int, s *goquery.Selection) {
		v.Set(s.AttrOr("name", ""), s.AttrOr("value", ""))
	})
	return v
}

// decide opens the action's page and submits the form for dec with extra
// fields, as a person would.
func detailDecide(t *testing.T, b *browser, id, dec string, extra url.Values) page {
	t.Helper()
	v := detailForm(t, b.get("/actions/"+id), dec)
	for k, vs := range extra {
		v[k] = vs
	}
	return b.post("/actions/"+id+"/decisions", v)
}

func offeredDecisions(p page) []string {
	var out []string
	p.doc.Find(`[data-decision]`).Each(func(_ int, s *goquery.Selection) {
		out = append(out, s.AttrOr("data-decision", ""))
	})
	return out
}

func timelineTypes(p page) []string {
	var out []string
	p.testid("timeline-entry").Each(func(_ int, s *goquery.Selection) {
		out = append(out, s.AttrOr("data-type", ""))
	})
	return out
}

func flatText(s *goquery.Selection) string { return strings.Join(strings.Fields(s.Text()), " ") }

func TestActionPageShowsTheAction(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		d := newDetailEnv(t, st)
		m := d.entry(`{"key":"refund:order-8812","type":"intent","tool":"payments.refund","effect":"keyed","timeout":300,
			"reference":"order 8812","params":{"order":"8812","amount":1200,"currency":"EUR","lines":[1,2]},
			"occurred_at":"2026-01-02T03:04:05Z"}`)
		id := m["action"].(map[string]any)["id"].(string)
		d.entry(`{"key":"refund:order-8812","type":"heartbeat","attempt":1,"timeout":300}`)

		p := d.op.get("/actions/" + id)
		require.Equal(t, http.StatusOK, p.status)
		require.Equal(t, "refund:order-8812", flatText(p.testid("action-key")))
		require.Equal(t, "in_progress", flatText(p.testid("action-status")))
		require.True(t, p.testid("action-status").HasClass("status-in_progress"), "status has its colour class")
		require.Equal(t, "payments.refund", flatText(p.testid("action-tool")))
		require.Contains(t, flatText(p.testid("action-effect")), "keyed — the downstream honours the key")
		require.Equal(t, "1", flatText(p.testid("action-attempt")))
		require.Equal(t, "2", flatText(p.testid("action-version")), "the heartbeat moved the lease")
		require.Contains(t, flatText(p.testid("action-lease")), "until ")
		require.Contains(t, flatText(p.testid("action-lease")), "(in 4 min)")
		require.Equal(t, "order 8812", flatText(p.testid("action-reference")))
		require.Equal(t, "bot", flatText(p.testid("action-agent")))
		require.Equal(t, "payments", flatText(p.testid("action-namespace")))
		created := p.testid("action-created").Find("time")
		require.Regexp(t, `^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$`, created.AttrOr("datetime", ""))
		require.Equal(t, "just now", flatText(created))
		require.Contains(t, flatText(p.testid("action-created")), created.AttrOr("datetime", ""), "absolute time shown too")

		// Params indented on the server, keys in canonical order.
		params := p.testid("action-params").Text()
		require.Equal(t, "{\n  \"amount\": 1200,\n  \"currency\": \"EUR\",\n  \"lines\": [\n    1,\n    2\n  ],\n  \"order\": \"8812\"\n}", params)
		require.Equal(t, "no result recorded", flatText(p.testid("action-result")))

		// The timeline: oldest first, who and both clocks.
		require.Equal(t, []string{"intent", "heartbeat"}, timelineTypes(p))
		first := p.testid("timeline-entry").First()
		require.Equal(t, "#1", flatText(first.Find(`[data-testid=entry-seq]`)))
		require.Equal(t, "agent", flatText(first.Find(`[data-testid=entry-actor-kind]`)))
		require.Equal(t, "bot", flatText(first.Find(`[data-testid=entry-actor-name]`)))
		require.Equal(t, "attempt 1", flatText(first.Find(`[data-testid=entry-attempt]`)))
		require.Regexp(t, `^server \d{4}-\d\d-\d\dT[\d:]+Z \(just now\)$`, flatText(first.Find(`[data-testid=entry-recorded]`)))
		require.Equal(t, "client 2026-01-02T03:04:05Z", flatText(first.Find(`[data-testid=entry-occurred]`)))
		require.Equal(t, "client —", flatText(p.testid("timeline-entry").Eq(1).Find(`[data-testid=entry-occurred]`)))
		require.Contains(t, first.Find(`details.payload [data-testid=entry-payload]`).Text(), `"tool": "payments.refund"`)

		// In progress: only confirm, with a word on why to wait.
		require.Equal(t, []string{"confirm"}, offeredDecisions(p))
		require.Equal(t, 1, p.testid("decision-running").Length())
		hidden := detailForm(t, p, "confirm")
		require.Equal(t, "2", hidden.Get("expected_version"))
		require.Equal(t, "2", hidden.Get("seen_seq"), "the newest entry shown")
		require.NotEmpty(t, hidden.Get("csrf_token"))

		// The outcome, then an operator's decision: three kinds of actor.
		d.entry(`{"key":"refund:order-8812","type":"succeeded","attempt":1,"result":{"refund_id":"re_1"},"external_ref":"re_1"}`)
		p = detailDecide(t, d.op, id, "compensate", url.Values{"reason": {"customer kept the goods"}})
		require.Equal(t, http.StatusSeeOther, p.status, p.body)
		p = d.op.get("/actions/" + id)
		require.Equal(t, "{\n  \"refund_id\": \"re_1\"\n}", p.testid("action-result").Text())
		require.Equal(t, "re_1", flatText(p.testid("action-external-ref")))
		require.Equal(t, []string{"intent", "heartbeat", "succeeded", "decision"}, timelineTypes(p))
		dec := p.testid("timeline-entry").Last()
		require.Equal(t, "operator", flatText(dec.Find(`[data-testid=entry-actor-kind]`)))
		require.Equal(t, "ops@example.com", flatText(dec.Find(`[data-testid=entry-actor-name]`)))
		require.Equal(t, "Decision: compensate", flatText(dec.Find(`[data-testid=entry-decision]`)))
		require.Equal(t, "customer kept the goods", flatText(dec.Find(`[data-testid=entry-reason]`)))
		require.Equal(t, "none", flatText(p.testid("action-lease")))
	})
}

func TestActionTimelineLabelsLateAndStaleEntries(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		d := newDetailEnv(t, st)
		ops := d.key("payments", "opbot", services.RoleOperator)
		stale := d.start("refund:stale", "keyed", 1, `{"amount":5}`)
		late := d.start("refund:late", "keyed", 1, `{"amount":6}`)
		d.timeOut()

		p := d.op.get("/actions/" + stale)
		require.Equal(t, "timed_out", flatText(p.testid("action-status")))
		require.Contains(t, flatText(p.testid("action-lease")), "passed ")
		require.Regexp(t, `^passed (just now|\d s ago) \(at \d{4}-\d\d-\d\dT[\d:]+Z\)$`, flatText(p.testid("action-lease")))
		sweep := p.testid("timeline-entry").Last()
		require.Equal(t, "timed_out", sweep.AttrOr("data-type", ""))
		require.Equal(t, "system", flatText(sweep.Find(`[data-testid=entry-actor-kind]`)))
		require.Equal(t, "sweeper", flatText(sweep.Find(`[data-testid=entry-actor-name]`)))
		require.Contains(t, flatText(sweep.Find(`[data-testid=entry-note]`)), "whether the effect happened is unknown")

		d.entry(`{"key":"refund:stale","type":"heartbeat","attempt":1}`) // lease_lost
		status, m := d.do("POST", "/v1/actions/"+stale+"/decisions", ops, `{"decision":"retry","reason":"downstream says no refund"}`)
		require.Equal(t, http.StatusCreated, status, "%v", m)
		d.entry(`{"key":"refund:stale","type":"intent","tool":"payments.refund","effect":"keyed","params":{"amount":5}}`)
		d.entry(`{"key":"refund:stale","type":"succeeded","attempt":1}`) // stale
		d.entry(`{"key":"refund:late","type":"succeeded","attempt":1}`)  // late

		p = d.op.get("/actions/" + stale)
		require.Equal(t, []string{"intent", "timed_out", "lease_lost", "decision", "intent", "stale_outcome"}, timelineTypes(p))
		notes := map[string]string{}
		p.testid("timeline-entry").Each(func(_ int, s *goquery.Selection) {
			notes[s.AttrOr("data-type", "")] = flatText(s.Find(`[data-testid=entry-note]`))
		})
		require.Equal(t, "from an attempt older than the current one — the effect may have happened twice", notes["stale_outcome"])
		require.Contains(t, notes["lease_lost"], "a heartbeat after the lease passed")
		require.Equal(t, "", notes["intent"])
		require.Equal(t, "carried: succeeded", flatText(p.testid("timeline-entry").Last().Find(`[data-testid=entry-summary]`)))
		require.Equal(t, "attempt 1", flatText(p.testid("timeline-entry").Last().Find(`[data-testid=entry-attempt]`)))
		require.Equal(t, "2", flatText(p.testid("action-attempt")))

		p = d.op.get("/actions/" + late)
		last := p.testid("timeline-entry").Last()
		require.Equal(t, "late_result", last.AttrOr("data-type", ""))
		require.Equal(t, "reported after the lease passed", flatText(last.Find(`[data-testid=entry-note]`)))
		require.Equal(t, "succeeded", flatText(p.testid("action-status")))
	})
}

func TestActionPageEscapesHostileContent(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		d := newDetailEnv(t, st)
		const hostile = `<script>alert(1)</script>`
		const img = `"><img src=x onerror=alert(1)>`
		m := d.entry(fmt.Sprintf(`{"key":%q,"type":"intent","tool":"payments.refund","timeout":1,"reference":%q,"agent":%q,
			"params":{"note":%q,"attr":%q}}`, hostile, hostile, img, hostile, img))
		id := m["action"].(map[string]any)["id"].(string)
		d.entry(fmt.Sprintf(`{"key":%q,"type":"note","message":%q}`, hostile, img))
		d.timeOut()
		p := detailDecide(t, d.op, id, "abandon", url.Values{"reason": {hostile + img}})
		require.Equal(t, http.StatusSeeOther, p.status, p.body)

		p = d.op.get("/actions/" + id)
		require.Equal(t, http.StatusOK, p.status)
		require.Equal(t, hostile, flatText(p.testid("action-key")))
		require.Equal(t, hostile, flatText(p.testid("action-reference")))
		require.Equal(t, img, flatText(p.testid("action-agent")))
		require.Contains(t, p.testid("action-params").Text(), `"note": "`+hostile+`"`)
		require.Equal(t, hostile+img, flatText(p.testid("timeline-entry").Last().Find(`[data-testid=entry-reason]`)))
		require.Contains(t, p.body, "&lt;script&gt;alert(1)&lt;/script&gt;")
		require.NotContains(t, p.body, "<script>alert(1)")
		require.NotContains(t, p.body, "<img src=x")
		require.Empty(t, p.doc.Find("script:not([src])").Nodes, "no script element from the data")
		require.Empty(t, p.doc.Find("img").Nodes)
		require.Empty(t, p.doc.Find("[style]").Nodes, "no inline styles")
		require.Empty(t, p.doc.Find("[onerror]").Nodes)

		// A refused decision shows the typed reason again, escaped.
		p = d.op.post("/actions/"+id+"/decisions", url.Values{"decision": {"abandon"}, "reason": {hostile}})
		require.Equal(t, http.StatusConflict, p.status, "nothing to decide any more")
		require.Contains(t, flatText(p.testid("decision-error")), "not allowed in the state the action is in now")
		require.NotContains(t, p.body, "<script>alert(1)")
	})
}

func TestEveryDecisionThroughTheForm(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		d := newDetailEnv(t, st)
		ids := map[string]string{}
		for _, k := range []string{"confirm", "retry", "compensate", "abandon"} {
			ids[k] = d.start("refund:"+k, "keyed", 1, `{"amount":1}`)
		}
		unkeyed := d.start("email:welcome", "unkeyed", 1, `{"to":"a@example.com"}`)
		d.timeOut()

		check := func(id string, p page, flash, status string) {
			t.Helper()
			require.Equal(t, http.StatusSeeOther, p.status, p.body)
			require.Equal(t, "/actions/"+id, p.header.Get("Location"))
			p = d.op.get("/actions/" + id)
			require.Equal(t, flash, flatText(p.testid("flash")))
			require.Equal(t, status, flatText(p.testid("action-status")))
			s, _ := d.apiStatus(id)
			require.Equal(t, status, s)
		}

		p := detailDecide(t, d.op, ids["confirm"], "confirm", url.Values{"reason": {"refund re_9 is in the PSP"},
			"external_ref": {"re_9"}, "result": {`{"refund_id":"re_9"}`}})
		check(ids["confirm"], p, "Confirmed — the ledger now records that the effect happened.", "confirmed")
		p = d.op.get("/actions/" + ids["confirm"])
		require.Equal(t, "re_9", flatText(p.testid("action-external-ref")))
		require.Equal(t, "External ref: re_9", flatText(p.testid("entry-external-ref")))
		require.Contains(t, p.testid("action-result").Text(), `"refund_id": "re_9"`)

		p = detailDecide(t, d.op, ids["retry"], "retry", url.Values{"reason": {"the PSP has no such refund"}})
		check(ids["retry"], p, "Retry requested — the agent's next intent with this key gets proceed as attempt 2.", "retry_requested")

		// Unkeyed: refused without the acknowledgement, the reason kept;
		// accepted with it.
		page0 := d.op.get("/actions/" + unkeyed)
		require.Contains(t, flatText(page0.testid("decision-retry").Find(`[data-testid=decision-ack]`)), "a retry may repeat the effect")
		require.Equal(t, 0, page0.testid("decision-confirm").Find(`[data-testid=decision-ack]`).Length())
		before := d.entryCount(unkeyed)
		p = detailDecide(t, d.op, unkeyed, "retry", url.Values{"reason": {"no email in the outbox"}})
		require.Equal(t, http.StatusUnprocessableEntity, p.status)
		require.Contains(t, flatText(p.testid("decision-error")), "unkeyed")
		require.Equal(t, "no email in the outbox", p.testid("decision-retry").Find(`textarea[name=reason]`).Text())
		_, open := p.testid("decision-retry").Attr("open")
		require.True(t, open, "the refused form stays open")
		require.Equal(t, before, d.entryCount(unkeyed), "nothing written")
		p = detailDecide(t, d.op, unkeyed, "retry", url.Values{"reason": {"no email in the outbox"}, "acknowledge_duplicate_risk": {"on"}})
		check(unkeyed, p, "Retry requested — the agent's next intent with this key gets proceed as attempt 2.", "retry_requested")
		p = d.op.get("/actions/" + unkeyed)
		require.Equal(t, 1, p.testid("entry-acknowledged").Length())

		p = detailDecide(t, d.op, ids["compensate"], "compensate", url.Values{"reason": {"refunded twice"}})
		check(ids["compensate"], p, "Compensation requested — the agent is told to undo the effect at its next intent.", "compensation_requested")
		p = detailDecide(t, d.op, ids["compensate"], "mark_compensated", url.Values{"reason": {"reversed in the PSP console"}})
		check(ids["compensate"], p, "Marked compensated — the ledger records that you undid the effect by hand.", "compensated")

		p = detailDecide(t, d.op, ids["abandon"], "abandon", url.Values{"reason": {"order cancelled before payout"}})
		check(ids["abandon"], p, "Abandoned — the action is recorded as not done and will not be retried.", "abandoned")
		p = d.op.get("/actions/" + ids["abandon"])
		require.Equal(t, "Nothing to decide: the action is abandoned.", flatText(p.testid("decision-none")))
		require.Empty(t, offeredDecisions(p))
	})
}

func TestDecisionPanelOffersOnlyAllowedDecisions(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		d := newDetailEnv(t, st)
		ops := d.key("payments", "opbot", services.RoleOperator)
		running := d.start("refund:running", "keyed", 300, `{}`)
		done := d.start("refund:done", "keyed", 300, `{}`)
		d.entry(`{"key":"refund:done","type":"succeeded","attempt":1}`)
		timedOut := d.start("refund:timed-out", "keyed", 1, `{}`)
		comp := d.start("refund:comp", "keyed", 1, `{}`)
		d.timeOut()
		status, _ := d.do("POST", "/v1/actions/"+comp+"/decisions", ops, `{"decision":"compensate","reason":"double refund"}`)
		require.Equal(t, http.StatusCreated, status)

		for _, tc := range []struct {
			id   string
			want []string
		}{
			{timedOut, []string{"confirm", "retry", "compensate", "abandon"}},
			{done, []string{"compensate"}},
			{comp, []string{"mark_compensated", "abandon"}},
			{running, []string{"confirm"}},
		} {
			p := d.op.get("/actions/" + tc.id)
			require.Equal(t, tc.want, offeredDecisions(p), flatText(p.testid("action-status")))
			for _, dec := range tc.want {
				require.NotEmpty(t, flatText(p.testid("decision-"+dec).Find(`[data-testid=decision-help]`)))
				require.Equal(t, 1, p.testid("decision-form-"+dec).Find(`textarea[name=reason][required]`).Length())
			}
		}
		p := d.op.get("/actions/" + timedOut)
		require.Equal(t, "The next intent with this key gets proceed as attempt 2 — the agent's worker runs it again.",
			flatText(p.testid("decision-retry").Find(`[data-testid=decision-help]`)))
		require.Equal(t, 0, p.testid("decision-ack").Length(), "a keyed retry needs no acknowledgement")
		require.Equal(t, 1, p.testid("decision-form-confirm").Find(`input[name=external_ref]`).Length())
		require.Equal(t, 1, p.testid("decision-form-confirm").Find(`textarea[name=result]`).Length())
		require.Equal(t, 0, p.testid("decision-form-retry").Find(`input[name=external_ref]`).Length())
	})
}

// The panel for each of the nine statuses, rendered alone: exactly the
// decisions of the spec's table.
func TestDecisionPanelForEveryStatus(t *testing.T) {
	t.Parallel()
	want := map[record.Status][]string{
		record.StatusInProgress:            {"confirm"},
		record.StatusSucceeded:             {"compensate"},
		record.StatusFailed:                {"confirm", "retry", "abandon"},
		record.StatusTimedOut:              {"confirm", "retry", "compensate", "abandon"},
		record.StatusRetryRequested:        {"confirm", "abandon"},
		record.StatusConfirmed:             {"compensate"},
		record.StatusCompensationRequested: {"mark_compensated", "abandon"},
		record.StatusCompensated:           nil,
		record.StatusAbandoned:             nil,
		record.StatusAwaitingApproval:      {"approve", "reject"},
		record.StatusApproved:              {"reject"},
		record.StatusDenied:                nil,
	}
	require.Len(t, want, len(record.Statuses))
	for _, st := range record.Statuses {
		a := &record.Action{ID: "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b", Status: st,
			Effect: record.EffectUnkeyed, Attempt: 1, Version: 3}
		if st == record.StatusAwaitingApproval || st == record.StatusApproved {
			a.Attempt, a.Approval = 0, &record.Approval{Required: 1, Approvals: []record.Vote{}, ExpiresAt: time.Now().Add(time.Hour)}
		}
		v := views.ActionView{Action: a, CanDecide: true, Now: time.Now()}
		var buf bytes.Buffer
		require.NoError(t, views.DecisionPanel(v).Render(context.Background(), &buf))
		doc, err := goquery.NewDocumentFromReader(&buf)
		require.NoError(t, err)
		p := page{doc: doc}
		require.Equal(t, want[st], offeredDecisions(p), "status %s", st)
		if want[st] == nil {
			require.Equal(t, "Nothing to decide: the action is "+string(st)+".", flatText(p.testid("decision-none")))
		}
		require.Equal(t, 0, p.testid("decision-readonly").Length())

		v.CanDecide = false
		buf.Reset()
		require.NoError(t, views.DecisionPanel(v).Render(context.Background(), &buf))
		doc, err = goquery.NewDocumentFromReader(&buf)
		require.NoError(t, err)
		p = page{doc: doc}
		require.Empty(t, offeredDecisions(p), "a viewer is offered nothing")
		require.Equal(t, 1, p.testid("decision-readonly").Length())
	}
}

func TestDecisionRefusals(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		d := newDetailEnv(t, st)
		id := d.start("refund:refusals", "keyed", 1, `{}`)
		d.timeOut()
		_, version := d.apiStatus(id)
		count := d.entryCount(id)

		// Missing reason.
		p := detailDecide(t, d.op, id, "abandon", url.Values{"reason": {"   "}})
		require.Equal(t, http.StatusBadRequest, p.status)
		require.Contains(t, flatText(p.testid("decision-error")), "give a reason")
		require.Equal(t, "timed_out", flatText(p.testid("action-status")))

		// Malformed evidence is refused by the service, with the typed values kept.
		p = detailDecide(t, d.op, id, "confirm", url.Values{"reason": {"seen in the PSP"}, "result": {"{not json"}, "external_ref": {"re_1"}})
		require.Equal(t, http.StatusBadRequest, p.status)
		require.Contains(t, flatText(p.testid("decision-error")), "the result must be JSON")
		require.Equal(t, "{not json", p.testid("decision-form-confirm").Find(`textarea[name=result]`).Text())
		require.Equal(t, "re_1", p.testid("decision-form-confirm").Find(`input[name=external_ref]`).AttrOr("value", ""))
		require.Equal(t, "seen in the PSP", p.testid("decision-form-confirm").Find(`textarea[name=reason]`).Text())

		// A decision the state does not allow (a hand-made form).
		p = detailDecide(t, d.op, id, "abandon", url.Values{"reason": {"x"}, "decision": {"mark_compensated"}})
		require.Equal(t, http.StatusConflict, p.status)
		require.Contains(t, flatText(p.testid("decision-error")), "not allowed in the state the action is in now")

		// A tampered version.
		p = detailDecide(t, d.op, id, "abandon", url.Values{"reason": {"x"}, "expected_version": {"two"}})
		require.Equal(t, http.StatusBadRequest, p.status)
		require.Contains(t, flatText(p.testid("decision-error")), "Reload the page")

		// Without the CSRF token.
		v := detailForm(t, d.op.get("/actions/"+id), "abandon")
		v.Set("reason", "no token")
		v.Set("csrf_token", "")
		p = d.op.post("/actions/"+id+"/decisions", v)
		require.Equal(t, http.StatusForbidden, p.status)
		require.Equal(t, 1, p.testid("error-page").Length())

		// A viewer sees no panel and may not decide.
		pw := d.user("viewer@example.com", services.RoleViewer)
		viewer := d.browser()
		viewer.signIn("viewer@example.com", pw)
		p = viewer.get("/actions/" + id)
		require.Equal(t, http.StatusOK, p.status)
		require.Equal(t, 1, p.testid("decision-readonly").Length())
		require.Empty(t, offeredDecisions(p))
		p = viewer.post("/actions/"+id+"/decisions", url.Values{"decision": {"abandon"}, "reason": {"I am only a viewer"},
			"expected_version": {fmt.Sprint(version)}})
		require.Equal(t, http.StatusForbidden, p.status)
		require.Equal(t, 0, p.testid("error-page").Length(), "the refusal is shown in the action's panel")
		require.Contains(t, flatText(p.testid("decision-error")), "you may not decide")

		s, ver := d.apiStatus(id)
		require.Equal(t, "timed_out", s)
		require.Equal(t, version, ver)
		require.Equal(t, count, d.entryCount(id), "nothing written by any refusal")

		// Unknown and malformed ids: the 404 page.
		for _, path := range []string{"/actions/0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b", "/actions/nonsense",
			"/actions/0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b/timeline"} {
			p = d.op.get(path)
			require.Equal(t, http.StatusNotFound, p.status, path)
			require.Equal(t, 1, p.testid("error-page").Length(), path)
		}
		p = d.op.post("/actions/0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b/decisions", url.Values{"decision": {"abandon"}, "reason": {"x"}})
		require.Equal(t, http.StatusNotFound, p.status)
		require.Equal(t, 1, p.testid("error-page").Length())
	})
}

func TestDecisionVersionConflict(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		d := newDetailEnv(t, st)
		id := d.start("refund:contested", "keyed", 1, `{}`)
		d.timeOut()

		// Two operators open the page; the second one decides first.
		mine := detailForm(t, d.op.get("/actions/"+id), "confirm")
		pw := d.user("night@example.com", services.RoleOperator)
		other := d.browser()
		other.signIn("night@example.com", pw)
		p := detailDecide(t, other, id, "retry", url.Values{"reason": {"PSP shows nothing"}})
		require.Equal(t, http.StatusSeeOther, p.status, p.body)
		count := d.entryCount(id)

		mine.Set("reason", "I saw the refund in the PSP")
		p = d.op.post("/actions/"+id+"/decisions", mine)
		require.Equal(t, http.StatusConflict, p.status)
		box := p.testid("conflict")
		require.Equal(t, 1, box.Length())
		require.Contains(t, flatText(box), "Changed since you opened it")
		cells := func(id string) []string {
			var out []string
			box.Find(`[data-testid=` + id + `]`).Children().Each(func(_ int, s *goquery.Selection) { out = append(out, flatText(s)) })
			return out
		}
		require.Equal(t, []string{"You saw", "timed_out", "2"}, cells("conflict-seen"))
		require.Equal(t, []string{"Now", "retry_requested", "3"}, cells("conflict-now"))
		entries := box.Find(`[data-testid=conflict-entry]`)
		require.Equal(t, 1, entries.Length())
		require.Contains(t, flatText(entries), "night@example.com")
		require.Contains(t, flatText(entries), "operator")
		require.Equal(t, "retry — “PSP shows nothing”", flatText(entries.Find(`[data-testid=conflict-decision]`)))
		require.Equal(t, "You tried: confirm — “I saw the refund in the PSP”", flatText(box.Find(`[data-testid=conflict-tried]`)))

		// The panel is for the new state, with the typed reason kept.
		require.Equal(t, "retry_requested", flatText(p.testid("action-status")))
		require.Equal(t, []string{"confirm", "abandon"}, offeredDecisions(p))
		require.Equal(t, "3", detailForm(t, p, "confirm").Get("expected_version"))
		require.Equal(t, "I saw the refund in the PSP", p.testid("decision-form-confirm").Find(`textarea[name=reason]`).Text())
		require.Equal(t, count, d.entryCount(id), "nothing written")
	})
}

func TestDecisionWithHTMX(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		d := newDetailEnv(t, st)
		id := d.start("refund:htmx", "keyed", 1, `{}`)
		d.timeOut()

		send := func(v url.Values) page {
			t.Helper()
			req, err := http.NewRequest("POST", d.srv.URL+"/actions/"+id+"/decisions", strings.NewReader(v.Encode()))
			require.NoError(t, err)
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("HX-Request", "true")
			req.Header.Set("X-CSRF-Token", v.Get("csrf_token"))
			return d.op.do(req)
		}
		v := detailForm(t, d.op.get("/actions/"+id), "retry")
		token := v.Get("csrf_token")

		// A refusal is a fragment too, with the message.
		p := send(url.Values{"decision": {"retry"}, "reason": {""}, "expected_version": {v.Get("expected_version")}, "csrf_token": {token}})
		require.Equal(t, http.StatusOK, p.status, "a refusal is the panel htmx asked for")
		require.Equal(t, "invalid", p.header.Get("Arbiter-Refusal"))
		require.Equal(t, 0, p.doc.Find("html > head > title").Length()+p.doc.Find("header.topbar").Length(), "a fragment")
		require.Equal(t, 1, p.testid("decision-error").Length())

		v.Set("reason", "nothing at the PSP")
		p = send(v)
		require.Equal(t, http.StatusOK, p.status, p.body)
		require.Empty(t, p.header.Get("Location"))
		require.NotContains(t, p.body, "<html")
		require.Equal(t, 0, p.doc.Find("header.topbar").Length(), "not a full page")
		live := p.testid("action-live")
		require.Equal(t, 1, live.Length())
		require.Equal(t, "action-live", live.AttrOr("id", ""))
		require.Equal(t, "Retry requested — the agent's next intent with this key gets proceed as attempt 2.", flatText(p.testid("decision-notice")))
		require.Equal(t, "retry_requested", flatText(p.testid("action-status")))
		require.Equal(t, "decision", p.testid("timeline-entry").Last().AttrOr("data-type", ""))
		require.Equal(t, []string{"confirm", "abandon"}, offeredDecisions(p))
		require.Equal(t, "#action-live", p.header.Get("HX-Retarget"), "a decision taken refreshes the whole live part")
		require.Equal(t, "outerHTML", p.header.Get("HX-Reswap"))
		form := p.testid("decision-form-confirm")
		require.Equal(t, "#decision-panel", form.AttrOr("hx-target", ""))
		require.Equal(t, "outerHTML", form.AttrOr("hx-swap", ""))
		require.Equal(t, "/actions/"+id+"/decisions", form.AttrOr("hx-post", ""))
		require.Equal(t, "/actions/"+id+"/decisions", form.AttrOr("action", ""))

		// The timeline alone.
		p = d.op.get("/actions/" + id + "/timeline")
		require.Equal(t, http.StatusOK, p.status)
		require.NotContains(t, p.body, "<html")
		require.Equal(t, 1, p.testid("timeline").Length())
		require.Equal(t, 0, p.testid("decision-panel").Length())
		require.Equal(t, []string{"intent", "timed_out", "decision"}, timelineTypes(p))
	})
}

func TestKeyReuseComparison(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		d := newDetailEnv(t, st)
		id := d.start("refund:order-77", "keyed", 300, `{"amount":100,"currency":"EUR","order":"77"}`)
		status, m := d.do("POST", "/v1/entries", d.agent, `{"key":"refund:order-77","type":"intent","tool":"payments.refund",
			"params":{"amount":999,"currency":"EUR","note":"<b>again</b>"}}`)
		require.Equal(t, http.StatusUnprocessableEntity, status, "%v", m)

		p := d.op.get("/actions/" + id)
		require.Equal(t, 1, p.testid("key-reuse-entry").Length())
		rows := map[string][3]string{}
		p.testid("key-reuse-row").Each(func(_ int, s *goquery.Selection) {
			cells := s.Find("td")
			rows[s.AttrOr("data-key", "")] = [3]string{flatText(cells.Eq(0)), flatText(cells.Eq(1)), s.AttrOr("data-change", "")}
		})
		require.Equal(t, map[string][3]string{
			"amount":   {"100", "999", "changed"},
			"currency": {`"EUR"`, `"EUR"`, "same"},
			"note":     {"(absent)", `"<b>again</b>"`, "added"},
			"order":    {`"77"`, "(absent)", "removed"},
		}, rows)
		require.True(t, p.testid("key-reuse-row").Eq(0).HasClass("row-changed"), "differences are highlighted")
		fp := p.testid("key-reuse-fingerprint").Find("td")
		require.Len(t, flatText(fp.Eq(0)), 64)
		require.Len(t, flatText(fp.Eq(1)), 64)
		require.NotEqual(t, flatText(fp.Eq(0)), flatText(fp.Eq(1)))
		require.Equal(t, "different", flatText(fp.Eq(2)))
		require.Equal(t, "same", flatText(p.testid("key-reuse-tool").Find("td").Eq(2)))
		require.NotContains(t, p.body, "<b>again")

		reused := p.testid("timeline-entry").Last()
		require.Equal(t, "key_reused", reused.AttrOr("data-type", ""))
		require.Contains(t, flatText(reused.Find(`[data-testid=entry-note]`)), "the same key was offered with a different tool or params")
		require.Equal(t, "in_progress", flatText(p.testid("action-status")), "the stored action is untouched")
	})
}
