package web

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/record"
	"github.com/arbiter-ledger/arbiter/views"
)

// Bulk decisions on the dashboard: the bulk bar on triage and the action
// list posts to preview (a dry run, answered with the confirmation), whose
// form posts to apply. Both go through Ledger.DecideMany, like the API.

// bulkLedger is what the bulk pages need from the ledger.
type bulkLedger interface {
	DecideMany(ctx context.Context, p services.Principal, in services.BulkInput) (*services.BulkAnswer, error)
	Action(ctx context.Context, p services.Principal, id string) (*record.Action, error)
}

// bulkPages serves the steps of a bulk decision.
type bulkPages struct {
	*dashboard
	ledger bulkLedger
}

func newBulkPages(dash *dashboard, d Deps) *bulkPages {
	return &bulkPages{dashboard: dash, ledger: d.Ledger}
}

// preview counts what the decision would apply to and answers the
// confirmation; nothing is written.
func (h *bulkPages) preview(c echo.Context) error {
	v, in := readBulkForm(c)
	if v.Error == "" {
		// The dry run needs no reason, but the decision will: say so now
		// rather than after the confirmation.
		d := services.DecisionInput{Decision: in.Decision, Reason: in.Reason, AcknowledgeDuplicateRisk: in.AcknowledgeDuplicateRisk}
		if err := d.Validate(); err != nil {
			return h.refuse(c, v, err)
		}
		in.DryRun = true
		ans, err := h.ledger.DecideMany(c.Request().Context(), principal(c), in)
		if err != nil {
			return h.refuse(c, v, err)
		}
		pv := ans.Preview
		v.Previewed, v.Matched, v.Allowed, v.Sample = true, pv.Matched, pv.Allowed, pv.Sample
		skipped := append(pv.Skipped, h.unmatched(c, v.IDs, pv)...)
		counts := map[string]int{}
		for _, s := range skipped {
			if counts[s.Code] == 0 {
				v.WillSkip = append(v.WillSkip, views.BulkSkipCount{Code: s.Code})
			}
			counts[s.Code]++
		}
		for i := range v.WillSkip {
			v.WillSkip[i].Count = counts[v.WillSkip[i].Code]
		}
	}
	return h.show(c, formStatus(v), v)
}

// unmatched says why ticked rows a dry run did not match: each is an
// action the user may see but not decide (views.SkipNotDecidable), or
// one that is not there for them (not found). The dry run names the
// actions it skipped and a sample of those it allows; the rest are read
// one by one, as many as the request ticked at most.
func (h *bulkPages) unmatched(c echo.Context, ids []string, pv *services.BulkPreview) []services.BulkSkip {
	seen := map[string]bool{}
	for _, a := range pv.Sample {
		seen[a.ID] = true
	}
	for _, s := range pv.Skipped {
		seen[s.ID] = true
	}
	var out []services.BulkSkip
	left := 0
	for _, id := range ids {
		u, err := uuid.Parse(id)
		if err != nil || seen[u.String()] {
			continue
		}
		seen[u.String()] = true
		left++
	}
	left -= pv.Allowed - len(pv.Sample) // allowed, beyond the sample
	p := principal(c)
	for _, id := range ids {
		if left <= 0 {
			break
		}
		u, err := uuid.Parse(id)
		if err != nil || !seen[u.String()] {
			continue
		}
		delete(seen, u.String())
		a, err := h.ledger.Action(c.Request().Context(), p, u.String())
		switch {
		case err != nil:
			out = append(out, services.BulkSkip{ID: u.String(), Code: services.CodeNotFound})
		case !p.DecidesIn(a.Namespace):
			out = append(out, services.BulkSkip{ID: a.ID, Code: views.SkipNotDecidable})
		default:
			continue // allowed, beyond the sample
		}
		left--
	}
	return out
}

// formStatus is 400 for a form that could not make a request.
func formStatus(v views.BulkView) int {
	if v.Error != "" {
		return http.StatusBadRequest
	}
	return http.StatusOK
}

// apply takes the decision the confirmation showed, bounded by the count
// it showed (max_count).
func (h *bulkPages) apply(c echo.Context) error {
	v, in := readBulkForm(c)
	if v.Error == "" {
		n, err := strconv.Atoi(c.FormValue("max_count"))
		if err != nil {
			v.Error = "The form did not say how many actions you confirmed; count them again."
			return h.show(c, http.StatusBadRequest, v)
		}
		in.MaxCount = &n
		ans, err := h.ledger.DecideMany(c.Request().Context(), principal(c), in)
		if e, ok := services.AsError(err); ok && e.Code == services.CodeTooManyMatched {
			err = services.Errorf(e.Code, "Nothing was written: more actions can take this decision now than the %d you confirmed. "+
				"Go back and count them again.", n)
		}
		if err != nil {
			return h.refuse(c, v, err)
		}
		v.Done, v.Applied = true, ans.Result.Applied
		for _, s := range ans.Result.Skipped {
			row := views.BulkSkipRow{ID: s.ID, Code: s.Code}
			// The ledger skips an action the user may not decide as not
			// found, whether or not it exists; one the user can read is
			// theirs to see but not to decide, and says so.
			if s.Code == services.CodeNotFound || len(v.Skipped) < services.BulkSampleSize*5 {
				if a, err := h.ledger.Action(c.Request().Context(), principal(c), s.ID); err == nil {
					row.Key = a.Key
					if s.Code == services.CodeNotFound {
						row.Code = views.SkipNotDecidable
					}
				}
			}
			v.Skipped = append(v.Skipped, row)
		}
	}
	return h.show(c, formStatus(v), v)
}

// refuse shows why a step was refused, with the form's choices kept, at the
// status the one mapper gives; errors that are not the form's (forbidden,
// the database) go to the error page.
func (h *bulkPages) refuse(c echo.Context, v views.BulkView, err error) error {
	r, ok := refusalOf(err)
	if !ok {
		return err
	}
	switch r.code {
	case services.CodeInvalid, services.CodeNotFound, services.CodeTooManyMatched:
	default:
		return err
	}
	v.Error = r.message
	return h.show(c, r.status, v)
}

// show answers a step: the fragment for htmx, a page otherwise.
func (h *bulkPages) show(c echo.Context, status int, v views.BulkView) error {
	if isHTMX(c) {
		return render(c, status, views.BulkStep(v))
	}
	return render(c, status, views.BulkPage(h.pageFor(c, "Decide on several actions", ""), v))
}

// readBulkForm reads the bulk bar's or the confirmation's form into the
// view that shows it again and the request it makes. A form that cannot
// make a request sets the view's Error.
func readBulkForm(c echo.Context) (views.BulkView, services.BulkInput) {
	v := views.BulkView{Now: time.Now().UTC(), Back: safeBack(c.FormValue("back"))}
	if s, ok := currentSession(c); ok {
		v.CSRF = s.CSRF
	}
	v.Decision = c.FormValue("decision")
	v.Reason = c.FormValue("reason")
	if v.Decision == string(record.DecisionRetry) {
		ack := c.FormValue("acknowledge_duplicate_risk")
		v.Acknowledged = ack == "on" || ack == "true"
	}
	in := services.BulkInput{Decision: record.Decision(v.Decision), Reason: v.Reason, AcknowledgeDuplicateRisk: v.Acknowledged,
		Filter: &services.BulkFilter{}}
	form, _ := c.FormParams()
	v.All = c.FormValue("scope") == "all"
	if !v.All {
		for _, id := range form["ids"] {
			if id = strings.TrimSpace(id); id != "" && !slices.Contains(v.IDs, id) {
				v.IDs = append(v.IDs, id)
			}
		}
		if len(v.IDs) == 0 {
			v.Error = "Tick at least one row, or choose every matching action."
		}
		in.Filter.IDs = v.IDs
		return v, in
	}
	f := views.BulkFilterFields{Namespace: c.FormValue("f_namespace"), Tool: c.FormValue("f_tool"),
		Agent: c.FormValue("f_agent"), Since: c.FormValue("f_since"), Until: c.FormValue("f_until"), Q: c.FormValue("f_q")}
	f.Statuses = form["f_status"]
	v.Filter = f
	in.Filter = &services.BulkFilter{Namespace: f.Namespace, Tool: f.Tool, Agent: f.Agent, Search: f.Q}
	for _, s := range f.Statuses {
		in.Filter.Status = append(in.Filter.Status, record.Status(s))
	}
	for _, t := range []struct {
		raw string
		to  **time.Time
	}{{f.Since, &in.Filter.Since}, {f.Until, &in.Filter.Until}} {
		if t.raw == "" {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, t.raw)
		if err != nil {
			v.Error = "The filter's times are not ones this page wrote; go back to the list and try again."
			break
		}
		*t.to = &at
	}
	return v, in
}

// safeBack is the list to return to: a path on this site, or triage.
func safeBack(back string) string {
	if !strings.HasPrefix(back, "/") || strings.HasPrefix(back, "//") || strings.HasPrefix(back, "/\\") {
		return "/"
	}
	return back
}

// canDecide reports whether the signed-in user may take decisions somewhere.
func canDecide(c echo.Context) bool {
	_, ok := currentSession(c)
	return ok && principal(c).CanDecide()
}

// bulkBar is the bulk bar of a list for the signed-in user; nil for people
// who may not decide.
func bulkBar(c echo.Context, allLabel string, f views.BulkFilterFields) *views.BulkBarView {
	s, ok := currentSession(c)
	if !ok || !canDecide(c) {
		return nil
	}
	return &views.BulkBarView{CSRF: s.CSRF, Back: c.Request().URL.RequestURI(), AllLabel: allLabel, Filter: f}
}
