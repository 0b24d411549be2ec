package web

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/arbiter-ledger/arbiter/services/record"

	"github.com/labstack/echo/v4"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/views"
)

// list is the action list. The filter lives in the URL, so a filtered page
// can be shared; a refused filter is shown on the page with the form, as 400.
func (h *triagePages) list(c echo.Context) error {
	ctx := c.Request().Context()
	now := time.Now().UTC()
	v := views.ActionListView{Now: now}
	for _, s := range record.Statuses {
		v.Statuses = append(v.Statuses, string(s))
	}
	nss, err := h.namespaces.Namespaces(ctx)
	if err != nil {
		return err
	}
	// The menu offers only what the user may see: the names of other
	// teams' namespaces are not theirs to learn.
	for _, ns := range nss {
		if principal(c).Sees(ns.Name) {
			v.Namespaces = append(v.Namespaces, ns.Name)
		}
	}
	q, qerr := queryValues(c)
	f, form, err := parseListFilter(q, now)
	if qerr != nil {
		err = qerr
	}
	v.Filter = form
	if form.Namespace != "" && !slices.Contains(v.Namespaces, form.Namespace) {
		v.Namespaces = append(v.Namespaces, form.Namespace)
	}
	var page *services.ActionPage
	if err == nil {
		page, err = h.ledger.List(ctx, principal(c), f)
	}
	if e, ok := services.AsError(err); ok && e.Code == services.CodeInvalid {
		v.Error = e.Message
		return render(c, http.StatusBadRequest, views.ActionsList(h.pageFor(c, "Actions", "actions"), v))
	}
	if err != nil {
		return err
	}
	for _, a := range page.Actions {
		v.Rows = append(v.Rows, views.ActionListRow{ID: a.ID, Namespace: a.Namespace, Key: a.Key, Tool: a.Tool,
			Effect: string(a.Effect), Status: string(a.Status), Attempt: a.Attempt, Agent: deref(a.Agent),
			Reference: deref(a.Reference), CreatedAt: a.CreatedAt})
	}
	v.Bulk = listBulkBar(c, f, form, len(v.Rows), f.Cursor == "" && page.NextCursor == nil)
	base := listQuery(form)
	if f.Cursor != "" {
		v.FirstURL = "/actions" + encodeQuery(base)
	}
	if page.NextCursor != nil {
		next := listQuery(form)
		next.Set("cursor", *page.NextCursor)
		v.NextURL = "/actions" + encodeQuery(next)
	}
	return render(c, http.StatusOK, views.ActionsList(h.pageFor(c, "Actions", "actions"), v))
}

// listRanges are the quick time choices.
var listRanges = map[string]time.Duration{"hour": time.Hour, "day": 24 * time.Hour, "week": 7 * 24 * time.Hour}

// parseListFilter reads the list filter from the URL. It returns the form as
// it should be shown again, with times normalised for datetime-local inputs,
// even when a value is refused.
func parseListFilter(q url.Values, now time.Time) (services.ActionFilter, views.ActionListFilter, error) {
	form := views.ActionListFilter{Namespace: q.Get("namespace"), Tool: strings.TrimSpace(q.Get("tool")),
		Agent: strings.TrimSpace(q.Get("agent")), Q: strings.TrimSpace(q.Get("q")), Range: q.Get("range"),
		Since: q.Get("since"), Until: q.Get("until"), Limit: q.Get("limit")}
	f := services.ActionFilter{Namespace: form.Namespace, Tool: form.Tool, Agent: form.Agent, Search: form.Q,
		Cursor: q.Get("cursor")}
	var bad []string
	statuses := q["status"]
	if n := countValues(statuses); n > services.MaxFilterValues {
		bad = append(bad, fmt.Sprintf("Status names %d values; the limit is %d", n, services.MaxFilterValues))
		statuses = nil
	}
	for _, v := range statuses {
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s == "" || slices.Contains(form.Statuses, s) {
				continue
			}
			if !slices.Contains(record.Statuses, record.Status(s)) {
				bad = append(bad, fmt.Sprintf("unknown status %q", s))
				continue
			}
			form.Statuses = append(form.Statuses, s)
			f.Statuses = append(f.Statuses, record.Status(s))
		}
	}
	var err error
	if f.Since, form.Since, err = localTime(form.Since, "Since"); err != nil {
		bad = append(bad, err.Error())
	}
	if f.Until, form.Until, err = localTime(form.Until, "Until"); err != nil {
		bad = append(bad, err.Error())
	}
	if form.Range != "" {
		d, ok := listRanges[form.Range]
		switch {
		case !ok:
			bad = append(bad, fmt.Sprintf("unknown time range %q: choose last hour, day or week", form.Range))
		case f.Since == nil:
			since := now.Add(-d)
			f.Since = &since
		}
	}
	if f.Since != nil && f.Until != nil && !f.Since.Before(*f.Until) {
		bad = append(bad, "Since must be before Until")
	}
	if form.Limit != "" {
		n, err := strconv.Atoi(form.Limit)
		if err != nil || n < 1 || n > services.MaxListLimit {
			bad = append(bad, fmt.Sprintf("limit must be a number from 1 to %d", services.MaxListLimit))
		}
		f.Limit = n
	}
	if len(bad) > 0 {
		return f, form, services.Errorf(services.CodeInvalid, "%s.", strings.Join(bad, "; "))
	}
	return f, form, nil
}

// The forms a datetime-local input sends, and RFC 3339 for links written by
// hand or copied from the API.
var localLayouts = []string{"2006-01-02T15:04", "2006-01-02T15:04:05", time.RFC3339Nano}

// localTime reads a time filter as UTC and returns it with the form's value
// for it; a refused value is shown back as it was typed.
func localTime(raw, name string) (*time.Time, string, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return nil, "", nil
	}
	for _, layout := range localLayouts {
		if t, err := time.ParseInLocation(layout, raw, time.UTC); err == nil {
			t = t.UTC()
			return &t, t.Format("2006-01-02T15:04:05"), nil
		}
	}
	return nil, raw, fmt.Errorf("%s %q is not a time: use YYYY-MM-DDTHH:MM, in UTC", name, raw)
}

// listQuery is the URL query of a filter, leaving out what is empty.
func listQuery(f views.ActionListFilter) url.Values {
	q := url.Values{}
	for k, v := range map[string]string{"namespace": f.Namespace, "tool": f.Tool, "agent": f.Agent, "q": f.Q,
		"range": f.Range, "since": f.Since, "until": f.Until, "limit": f.Limit} {
		if v != "" {
			q.Set(k, v)
		}
	}
	for _, s := range f.Statuses {
		q.Add("status", s)
	}
	return q
}

func encodeQuery(q url.Values) string {
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}

// listBulkBar is the bulk bar of the action list: the ticked rows, or every
// action matching the list's filter (a relative range frozen to the time it
// started at), offered only when the filter names something.
func listBulkBar(c echo.Context, f services.ActionFilter, form views.ActionListFilter, rows int, whole bool) *views.BulkBarView {
	bf := views.BulkFilterFields{Namespace: f.Namespace, Statuses: form.Statuses, Tool: f.Tool, Agent: f.Agent, Q: f.Search}
	if f.Since != nil {
		bf.Since = f.Since.UTC().Format(time.RFC3339Nano)
	}
	if f.Until != nil {
		bf.Until = f.Until.UTC().Format(time.RFC3339Nano)
	}
	label := ""
	switch {
	case bf.Namespace == "" && len(bf.Statuses) == 0 && bf.Tool == "" && bf.Agent == "" && bf.Since == "" && bf.Until == "" && bf.Q == "":
	case whole:
		label = fmt.Sprintf("Every action matching this filter: %d", rows)
	default:
		label = "Every action matching this filter, on every page (counted on the next step)"
	}
	return bulkBar(c, label, bf)
}
