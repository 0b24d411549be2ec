package web

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/arbiter-ledger/arbiter/services/webhooks"

	"github.com/arbiter-ledger/arbiter/services/evidence"
	"github.com/arbiter-ledger/arbiter/services/record"

	"github.com/labstack/echo/v4"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/views"
)

// actionLedger is what one action's pages need from the ledger.
type actionLedger interface {
	ActionWithTimeline(ctx context.Context, p services.Principal, id string, before, limit int) (*record.Action, *services.TimelineWindow, error)
	Decide(ctx context.Context, p services.Principal, actionID string, d services.DecisionInput) (*record.Action, *record.Entry, error)
}

// actionPages serves one action's page, its timeline, and the decisions
// taken on it.
type actionPages struct {
	*dashboard
	ledger actionLedger
	hooks  deliveryReader
	// evidence marks each entry with its place in the log; nil shows none.
	evidence *evidence.Log
}

// deliveryReader lists the webhook deliveries an action caused.
type deliveryReader interface {
	ActionDeliveries(ctx context.Context, p services.Principal, a *record.Action) ([]*webhooks.Delivery, error)
}

func newActionPages(dash *dashboard, d Deps) *actionPages {
	h := &actionPages{dashboard: dash, ledger: d.Ledger, evidence: d.Evidence}
	if d.Webhooks != nil {
		h.hooks = d.Webhooks
	}
	return h
}

func (h *actionPages) page(c echo.Context) error {
	v, err := h.view(c)
	if err != nil {
		return err
	}
	return h.show(c, http.StatusOK, v)
}

// timelinePageSize bounds the entries one dashboard page shows; a page is
// also bounded by bytes (services.MaxPageBytes).
const timelinePageSize = 100

// timeline answers the timeline alone: its newest page for the refresh
// link, or with before=SEQ the page of entries older than SEQ, which htmx
// puts in the place of the "Older entries" link and a browser without
// JavaScript shows on a page of its own.
func (h *actionPages) timeline(c echo.Context) error {
	before := 0
	if q := c.QueryParams(); q.Has("before") {
		n, err := strconv.Atoi(q.Get("before"))
		if err != nil || n < 1 {
			return services.Errorf(services.CodeInvalid, "before must be the seq of an entry")
		}
		before = n
	}
	a, w, err := h.ledger.ActionWithTimeline(c.Request().Context(), principal(c), c.Param("id"), before, timelinePageSize)
	if err != nil {
		return err
	}
	v := views.ActionView{Action: a, Entries: w.Entries, Older: w.Older, Now: time.Now().UTC()}
	if v.Marks, err = h.marks(c, v); err != nil {
		return err
	}
	c.Response().Header().Add("Vary", "HX-Request")
	switch {
	case isHTMX(c) && before > 0:
		return render(c, http.StatusOK, views.TimelinePage(v))
	case isHTMX(c) || before == 0:
		return render(c, http.StatusOK, views.ActionTimeline(v))
	}
	return render(c, http.StatusOK, views.ActionTimelinePage(h.pageFor(c, "Older entries of "+a.Key, "actions"), v))
}

// decide takes a decision from the panel. Without JavaScript it answers a
// redirect with a flash; with htmx, the refreshed header, panel and timeline
// (the forms target the panel, so the answer is retargeted to the page's
// live part). A refusal, whatever its code, stays in the panel: with htmx
// the panel alone, saying why in words for a person, with the header
// refreshed beside it (htmxRefusal); without JavaScript the action's page
// with the same panel, under the refusal's status. Only an action that
// cannot be read at all leaves the page, and to htmx even that is a panel.
func (h *actionPages) decide(c echo.Context) error {
	form, in := readDecision(c)
	a, _, err := h.ledger.Decide(c.Request().Context(), principal(c), c.Param("id"), in)
	if err == nil {
		msg := views.DecidedMessage(in.Decision, a)
		if isHTMX(c) {
			v, err := h.view(c)
			if err != nil {
				return h.panelUnreadable(c, err)
			}
			v.Notice = msg
			c.Response().Header().Set("HX-Retarget", "#action-live")
			c.Response().Header().Set("HX-Reswap", "outerHTML")
			return render(c, http.StatusOK, views.ActionLive(v))
		}
		h.cookies.flash(c, msg)
		return c.Redirect(http.StatusSeeOther, "/actions/"+a.ID)
	}
	r, ok := refusalOf(err)
	if !ok {
		return err // logged and answered by the error handler
	}
	c.Set(logErrKey, err)
	v, verr := h.view(c)
	if verr != nil {
		return h.panelUnreadable(c, verr)
	}
	if r.code == services.CodeVersionConflict {
		v.Conflict = h.conflict(c, v, form)
		// The reason stays typed, but a duplicate-risk acknowledgement was
		// given for a state that is gone: it must be given again.
		form.Acknowledged = false
	}
	form.Error = r.text
	v.Form = form.DecisionForm
	if isHTMX(c) {
		return render(c, htmxRefusal(c, r), views.DecisionRefused(v))
	}
	return h.show(c, r.status, v)
}

// htmxRefusal marks an answer to htmx as a refusal and gives its status:
// 200 for a refusal of the decision, since the panel saying why is what the
// page asked for, and a 4xx answer to a script is a failed load the browser
// reports as an error. The refusal's code rides in the Arbiter-Refusal
// header. A database away stays 503 (app.js swaps the panel in): that is a
// failure, logged as one.
func htmxRefusal(c echo.Context, r refusal) int {
	c.Response().Header().Set("Arbiter-Refusal", r.code)
	if r.status >= http.StatusInternalServerError {
		c.Response().Header().Set("Retry-After", "1")
		return r.status
	}
	return http.StatusOK
}

// panelUnreadable answers a decision on an action the user cannot read
// (any more): the error page, or to htmx a panel saying so, since it lands
// inside the action's page.
func (h *actionPages) panelUnreadable(c echo.Context, err error) error {
	r, ok := refusalOf(err)
	if !isHTMX(c) || !ok {
		return err
	}
	c.Set(logErrKey, err)
	return render(c, htmxRefusal(c, r), views.DecisionPanelRefused(r.text))
}

// show answers the action's page, or only its live part to htmx.
func (h *actionPages) show(c echo.Context, status int, v views.ActionView) error {
	if isHTMX(c) {
		return render(c, status, views.ActionLive(v))
	}
	return render(c, status, views.ActionDetailPage(h.pageFor(c, "Action "+v.Action.Key, "actions"), v))
}

// view reads the action and its timeline for the signed-in user.
func (h *actionPages) view(c echo.Context) (views.ActionView, error) {
	a, w, err := h.ledger.ActionWithTimeline(c.Request().Context(), principal(c), c.Param("id"), 0, timelinePageSize)
	if err != nil {
		return views.ActionView{}, err
	}
	v := views.ActionView{Action: a, Entries: w.Entries, Older: w.Older, Now: time.Now().UTC()}
	if v.Marks, err = h.marks(c, v); err != nil {
		return views.ActionView{}, err
	}
	if h.hooks != nil {
		if v.Deliveries, err = h.hooks.ActionDeliveries(c.Request().Context(), principal(c), a); err != nil {
			return views.ActionView{}, err
		}
	}
	if s, ok := currentSession(c); ok {
		v.CSRF = s.CSRF
		v.CanDecide = s.Principal().DecidesIn(a.Namespace)
		v.Approved = services.HasApproved(a, s.Principal())
		v.Admin = s.Principal().Role == services.RoleAdmin
	}
	return v, nil
}

// marks proves the page's entries against the newest checkpoint.
func (h *actionPages) marks(c echo.Context, v views.ActionView) (map[string]evidence.Mark, error) {
	if h.evidence == nil {
		return nil, nil
	}
	return h.evidence.Marks(c.Request().Context(), v.Action.Namespace, v.Action.ID, v.Action.Key, v.Entries)
}

// conflict describes what changed since the page the operator decided on.
func (h *actionPages) conflict(c echo.Context, v views.ActionView, f decisionForm) *views.DecisionConflict {
	cf := &views.DecisionConflict{SeenVersion: f.seenVersion, SeenStatus: f.seenStatus}
	if f.seenSeq < 0 {
		return cf // the form did not say what it showed
	}
	for _, e := range v.Entries {
		if e.Seq > f.seenSeq {
			cf.Since = append(cf.Since, e)
		}
	}
	return cf
}

// decisionForm is a submitted decision form: what goes back into the panel,
// and what the page it came from showed.
type decisionForm struct {
	views.DecisionForm
	seenVersion int
	seenSeq     int // -1 when absent
	seenStatus  string
}

// readDecision reads the panel's form. Only the fields of the decision taken
// are passed on, so a stray field from a hand-made request is not an error
// the operator has to understand; the service validates the rest. The seen_*
// fields only describe the page the form was on, for a conflict message.
func readDecision(c echo.Context) (decisionForm, services.DecisionInput) {
	f := decisionForm{seenSeq: -1}
	f.Decision = c.FormValue("decision")
	f.Reason = c.FormValue("reason")
	in := services.DecisionInput{Decision: record.Decision(f.Decision), Reason: f.Reason}
	if v := c.FormValue("expected_version"); v != "" {
		// Not a number becomes 0, which the service refuses as invalid (after
		// it has refused a viewer as forbidden).
		n, _ := strconv.Atoi(v)
		in.ExpectedVersion, f.seenVersion = &n, n
	}
	if n, err := strconv.Atoi(c.FormValue("seen_seq")); err == nil {
		f.seenSeq = n
	}
	if st := record.Status(c.FormValue("seen_status")); validStatusName(st) {
		f.seenStatus = string(st)
	}
	switch record.Decision(f.Decision) {
	case record.DecisionRetry:
		ack := c.FormValue("acknowledge_duplicate_risk")
		f.Acknowledged = ack == "on" || ack == "true"
		in.AcknowledgeDuplicateRisk = f.Acknowledged
	case record.DecisionConfirm:
		f.ExternalRef = strings.TrimSpace(c.FormValue("external_ref"))
		f.Result = strings.TrimSpace(c.FormValue("result"))
		if f.ExternalRef != "" {
			in.ExternalRef = &f.ExternalRef
		}
		if f.Result != "" {
			in.Result = json.RawMessage(f.Result)
		}
	}
	return f, in
}

func validStatusName(s record.Status) bool {
	for _, x := range record.Statuses {
		if x == s {
			return true
		}
	}
	return false
}
