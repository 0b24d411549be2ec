package web

import (
	"net/http"

	"github.com/labstack/echo/v4"
)

// actionPages serves one action's page and its decisions. (Being built.)
type actionPages struct {
	*dashboard
	d Deps
}

func newActionPages(dash *dashboard, d Deps) *actionPages { return &actionPages{dashboard: dash, d: d} }

func (h *actionPages) page(c echo.Context) error {
	return c.String(http.StatusNotImplemented, "not yet")
}
func (h *actionPages) timeline(c echo.Context) error {
	return c.String(http.StatusNotImplemented, "not yet")
}
func (h *actionPages) decide(c echo.Context) error {
	return c.String(http.StatusNotImplemented, "not yet")
}
