package web

import (
	"net/http"

	"github.com/labstack/echo/v4"
)

// adminPages serves namespaces, API keys and users. (Being built.)
type adminPages struct {
	*dashboard
	d Deps
}

func newAdminPages(dash *dashboard, d Deps) *adminPages { return &adminPages{dashboard: dash, d: d} }

func (h *adminPages) index(c echo.Context) error {
	return c.Redirect(http.StatusSeeOther, "/admin/namespaces")
}
func (h *adminPages) namespaces(c echo.Context) error {
	return c.String(http.StatusNotImplemented, "not yet")
}
func (h *adminPages) createNamespace(c echo.Context) error {
	return c.String(http.StatusNotImplemented, "not yet")
}
func (h *adminPages) keys(c echo.Context) error {
	return c.String(http.StatusNotImplemented, "not yet")
}
func (h *adminPages) createKey(c echo.Context) error {
	return c.String(http.StatusNotImplemented, "not yet")
}
func (h *adminPages) revokeKey(c echo.Context) error {
	return c.String(http.StatusNotImplemented, "not yet")
}
func (h *adminPages) users(c echo.Context) error {
	return c.String(http.StatusNotImplemented, "not yet")
}
func (h *adminPages) createUser(c echo.Context) error {
	return c.String(http.StatusNotImplemented, "not yet")
}
func (h *adminPages) setRole(c echo.Context) error {
	return c.String(http.StatusNotImplemented, "not yet")
}
func (h *adminPages) disableUser(c echo.Context) error {
	return c.String(http.StatusNotImplemented, "not yet")
}
func (h *adminPages) enableUser(c echo.Context) error {
	return c.String(http.StatusNotImplemented, "not yet")
}
func (h *adminPages) endSessions(c echo.Context) error {
	return c.String(http.StatusNotImplemented, "not yet")
}
