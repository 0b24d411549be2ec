package web

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/arbiter-ledger/arbiter/services/record"

	"github.com/labstack/echo/v4"

	"github.com/arbiter-ledger/arbiter/models"
	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/views"
)

// triageReader is what the triage queue and the action list need from the
// ledger.
type triageReader interface {
	Triage(ctx context.Context, p services.Principal, limit int) (*services.Triage, error)
	TriageStamp(ctx context.Context, p services.Principal) (string, error)
	List(ctx context.Context, p services.Principal, f services.ActionFilter) (*services.ActionPage, error)
}

// namespaceLister offers the namespaces the action list filters by.
type namespaceLister interface {
	Namespaces(ctx context.Context) ([]models.Namespace, error)
}

// triagePages serves the triage queue, its live updates, and the action
// list.
type triagePages struct {
	*dashboard
	ledger     triageReader
	namespaces namespaceLister
	feed       *triageFeed
	done       <-chan struct{} // closed when the server shuts down
	// sessions is asked every sessionCheckEvery whether an open event
	// stream's session is still live.
	sessions          sessionStore
	sessionCheckEvery time.Duration
	writeTimeout      time.Duration // each write of a stream gets this long
}

func newTriagePages(dash *dashboard, d Deps) *triagePages {
	return &triagePages{dashboard: dash, ledger: d.Ledger, namespaces: d.Keys,
		feed: newTriageFeed(func(ctx context.Context) (string, error) {
			return d.Ledger.TriageStamp(ctx, services.Principal{Role: services.RoleAdmin})
		}, d.Log), done: d.Done,
		sessions: d.Accounts, sessionCheckEvery: sessionCheckEvery, writeTimeout: cmp.Or(d.WriteTimeout, DefaultWriteTimeout)}
}

// page is the queue with the counts above it.
func (h *triagePages) page(c echo.Context) error {
	v, err := h.triageView(c)
	if err != nil {
		return err
	}
	var waiting int64
	var statuses []string
	for _, s := range services.TriageStatuses {
		statuses = append(statuses, string(s))
		for _, n := range v.Counts {
			if n.Name == string(s) {
				waiting += n.Count
			}
		}
	}
	v.Bulk = bulkBar(c, fmt.Sprintf("Every waiting action (%s): %d now", strings.Join(statuses, ", "), waiting),
		views.BulkFilterFields{Statuses: statuses})
	return render(c, http.StatusOK, views.TriagePage(h.pageFor(c, v.Title(), "triage"), v))
}

// items is the part of the page that live updates replace. It answers the
// fragment alone, with or without htmx.
func (h *triagePages) items(c echo.Context) error {
	v, err := h.triageView(c)
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.TriageUpdate(v))
}

func (h *triagePages) triageView(c echo.Context) (views.TriageView, error) {
	ctx := c.Request().Context()
	// The stamp is read before the queue: if the queue changes in between,
	// the page holds an older stamp and live updates fetch it again.
	stamp, err := h.ledger.TriageStamp(ctx, principal(c))
	if err != nil {
		return views.TriageView{}, err
	}
	t, err := h.ledger.Triage(ctx, principal(c), services.DefaultTriageLimit)
	if err != nil {
		return views.TriageView{}, err
	}
	v := views.TriageView{Now: t.At, Total: t.Total, Waiting: t.Waiting, Stamp: stamp, CanPick: canDecide(c),
		Mine: c.QueryParam("view") == views.MyApprovalsView}
	p := principal(c)
	for _, s := range services.OpenStatuses {
		v.Counts = append(v.Counts, views.TriageCount{Name: string(s), Count: t.Counts[string(s)],
			Attention: slices.Contains(services.TriageStatuses, s)})
	}
	for _, kind := range services.TriageAlerts {
		v.Alerts = append(v.Alerts, views.TriageCount{Name: string(kind), Count: t.Alerts[string(kind)], Attention: true})
	}
	for _, it := range t.Items {
		a := it.Action
		forMe := !it.Alert && a.Status == record.StatusAwaitingApproval && p.DecidesIn(a.Namespace) && !services.HasApproved(a, p)
		if forMe {
			v.ForMe++
		}
		if v.Mine && !forMe {
			continue
		}
		v.Rows = append(v.Rows, views.TriageRow{ActionID: a.ID, Kind: it.Kind, Alert: it.Alert,
			Status: string(a.Status), Namespace: a.Namespace, Key: a.Key, Tool: a.Tool, Effect: string(a.Effect),
			Attempt: a.Attempt, Reference: deref(a.Reference), Agent: deref(a.Agent), Summary: views.ParamsSummary(a.Params),
			Since: it.Since})
		if !it.Alert && a.Status == record.StatusAwaitingApproval {
			v.Rows[len(v.Rows)-1].Approval = views.ApprovalSummary(a.Approval, t.At)
		}
		if !it.Alert {
			v.Rows[len(v.Rows)-1].Lookup = views.LookupSummary(a, t.At)
		}
	}
	return v, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
