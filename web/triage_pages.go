package web

import (
	"net/http"

	"github.com/labstack/echo/v4"
)

// triagePages serves the triage queue and the action list. (Being built.)
type triagePages struct {
	*dashboard
	d Deps
}

func newTriagePages(dash *dashboard, d Deps) *triagePages { return &triagePages{dashboard: dash, d: d} }

func (h *triagePages) page(c echo.Context) error {
	return c.String(http.StatusNotImplemented, "not yet")
}
func (h *triagePages) items(c echo.Context) error {
	return c.String(http.StatusNotImplemented, "not yet")
}
func (h *triagePages) events(c echo.Context) error {
	return c.String(http.StatusNotImplemented, "not yet")
}
func (h *triagePages) list(c echo.Context) error {
	return c.String(http.StatusNotImplemented, "not yet")
}
