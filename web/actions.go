package web

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/arbiter-ledger/arbiter/services/record"

	"github.com/labstack/echo/v4"

	"github.com/arbiter-ledger/arbiter/services"
)

// actionReader is what the action handlers need from the ledger.
type actionReader interface {
	Action(ctx context.Context, p services.Principal, id string) (*record.Action, error)
	ActionByKey(ctx context.Context, p services.Principal, ns, key string) (*record.Action, error)
	List(ctx context.Context, p services.Principal, f services.ActionFilter) (*services.ActionPage, error)
	Timeline(ctx context.Context, p services.Principal, actionID string, q services.TimelineQuery) (*services.EntryPage, error)
	Decide(ctx context.Context, p services.Principal, actionID string, d services.DecisionInput) (*record.Action, *record.Entry, error)
}

// actionsHandler serves the action reads and decisions.
type actionsHandler struct {
	ledger actionReader
}

var listParams = map[string]bool{"key": true, "namespace": true, "status": true, "tool": true,
	"agent": true, "since": true, "until": true, "q": true, "limit": true, "cursor": true}

func (h *actionsHandler) list(c echo.Context) error {
	q, err := queryValues(c)
	if err != nil {
		return err
	}
	for k := range q {
		if !listParams[k] {
			return services.Errorf(services.CodeInvalid, "unknown query parameter %q", k)
		}
	}
	p := principal(c)
	if q.Has("key") {
		a, err := h.ledger.ActionByKey(c.Request().Context(), p, q.Get("namespace"), q.Get("key"))
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, a)
	}
	f := services.ActionFilter{Namespace: q.Get("namespace"), Tool: q.Get("tool"), Agent: q.Get("agent"),
		Search: q.Get("q"), Cursor: q.Get("cursor")}
	if n := countValues(q["status"]); n > services.MaxFilterValues {
		return tooManyValues("status", n)
	}
	for _, v := range q["status"] {
		for _, s := range strings.Split(v, ",") {
			s = strings.TrimSpace(s)
			if s == "" {
				return services.Errorf(services.CodeInvalid, "status must name a status: use one of %s", services.ListOrNone(record.Statuses))
			}
			if !slices.Contains(f.Statuses, record.Status(s)) {
				f.Statuses = append(f.Statuses, record.Status(s))
			}
		}
	}
	if f.Since, err = timeParam(q, "since"); err != nil {
		return err
	}
	if f.Until, err = timeParam(q, "until"); err != nil {
		return err
	}
	if q.Has("limit") {
		if f.Limit, err = strconv.Atoi(q.Get("limit")); err != nil || f.Limit < 1 {
			return services.Errorf(services.CodeInvalid, "limit must be an integer between 1 and %d", services.MaxListLimit)
		}
	}
	page, err := h.ledger.List(c.Request().Context(), p, f)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, page)
}

// timeParam reads an optional time from the query. Given, it must be a
// time: an empty since= is a mistake, not "since the beginning".
func timeParam(q url.Values, name string) (*time.Time, error) {
	if !q.Has(name) {
		return nil, nil
	}
	t, err := time.Parse(time.RFC3339Nano, q.Get(name))
	if err != nil {
		return nil, services.Errorf(services.CodeInvalid, "%s must be an RFC 3339 time such as 2026-11-30T10:00:00Z", name)
	}
	return &t, nil
}

func (h *actionsHandler) get(c echo.Context) error {
	a, err := h.ledger.Action(c.Request().Context(), principal(c), c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, a)
}

var timelineParams = map[string]bool{"limit": true, "cursor": true}

// entries answers one page of the action's timeline, oldest first.
func (h *actionsHandler) entries(c echo.Context) error {
	q := c.QueryParams()
	for k := range q {
		if !timelineParams[k] {
			return services.Errorf(services.CodeInvalid, "unknown query parameter %q", k)
		}
	}
	tq := services.TimelineQuery{Cursor: q.Get("cursor")}
	if q.Has("limit") {
		n, err := strconv.Atoi(q.Get("limit"))
		if err != nil || n < 1 {
			return services.Errorf(services.CodeInvalid, "limit must be an integer between 1 and %d", services.MaxTimelineLimit)
		}
		tq.Limit = n
	}
	if q.Has("cursor") && tq.Cursor == "" {
		return services.Errorf(services.CodeInvalid, "cursor must be the next_cursor of a previous page")
	}
	page, err := h.ledger.Timeline(c.Request().Context(), principal(c), c.Param("id"), tq)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, page)
}

type decisionResponse struct {
	Action *record.Action `json:"action"`
	Entry  *record.Entry  `json:"entry"`
}

func (h *actionsHandler) decide(c echo.Context) error {
	body, err := readBody(c)
	if err != nil {
		return err
	}
	var d services.DecisionInput
	if err := services.DecodeStrict(body, &d); err != nil {
		return err
	}
	a, e, err := h.ledger.Decide(c.Request().Context(), principal(c), c.Param("id"), d)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, decisionResponse{Action: a, Entry: e})
}
