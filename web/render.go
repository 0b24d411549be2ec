package web

import (
	"net/http"
	"strings"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/accounts"
	"github.com/arbiter-ledger/arbiter/views"
)

// render writes a templ component as the response.
func render(c echo.Context, status int, comp templ.Component) error {
	c.Response().Header().Set(echo.HeaderContentType, echo.MIMETextHTMLCharsetUTF8)
	c.Response().WriteHeader(status)
	return comp.Render(c.Request().Context(), c.Response())
}

// pageFor builds what every page needs for the current request.
func (d *dashboard) pageFor(c echo.Context, title, nav string) views.Page {
	p := views.Page{Title: title, Nav: nav, Flash: d.cookies.takeFlash(c)}
	if s, ok := currentSession(c); ok {
		p.User = userInfo(s)
		p.CSRF = s.CSRF
	}
	return p
}

// isHTMX reports whether htmx sent the request (and wants a fragment).
func isHTMX(c echo.Context) bool { return c.Request().Header.Get("HX-Request") == "true" }

// wantsHTML reports whether an error should be answered with a page rather
// than JSON: everything outside the API and the probes.
func wantsHTML(c echo.Context) bool {
	p := c.Request().URL.Path
	for _, prefix := range []string{"/v1/", "/healthz", "/readyz", "/metrics", "/static/"} {
		if strings.HasPrefix(p, prefix) {
			return false
		}
	}
	return true
}

var errorTitles = map[int]string{
	http.StatusNotFound:              "Not found",
	http.StatusForbidden:             "Not allowed",
	http.StatusBadRequest:            "Bad request",
	http.StatusConflict:              "Conflict",
	http.StatusServiceUnavailable:    "Database unavailable",
	http.StatusInternalServerError:   "Something went wrong",
	http.StatusTooManyRequests:       "Too many attempts",
	http.StatusMethodNotAllowed:      "Method not allowed",
	http.StatusRequestEntityTooLarge: "Too large",
}

// userInfo is what every page shows of the signed-in user: their email, and
// their role, or where they are a member.
func userInfo(s accounts.Session) *views.UserInfo {
	pr := s.Principal()
	u := &views.UserInfo{Email: s.User.Email, Role: s.User.Role, Decides: pr.CanDecide()}
	if pr.Role != services.RoleAdmin {
		u.Role = views.MembershipSummary(s.Memberships)
	}
	return u
}
