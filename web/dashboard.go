package web

import (
	"io/fs"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/static"
	"github.com/arbiter-ledger/arbiter/views"
)

// dashboard holds what every dashboard page needs.
type dashboard struct {
	cookies cookies
	origins *originCheck
	signIn  views.SignInOptions // the ways of signing in this server offers
}

// contentSecurityPolicy allows no inline script or style and nothing from
// other origins.
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; form-action 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'"

// staticFiles serves the embedded stylesheet, script and vendored htmx:
// files only, so a directory is 404 rather than a listing.
func staticFiles() echo.HandlerFunc {
	h := http.StripPrefix("/static/", http.FileServerFS(static.FS))
	return func(c echo.Context) error {
		name := strings.TrimPrefix(c.Request().URL.Path, "/static/")
		if info, err := fs.Stat(static.FS, name); err != nil || info.IsDir() {
			return echo.ErrNotFound
		}
		c.Response().Header().Set("Cache-Control", "public, max-age=3600")
		h.ServeHTTP(c.Response(), c.Request())
		return nil
	}
}

// errorPage renders an error in the dashboard's design.
func (d *dashboard) errorPage(c echo.Context, status int, e *services.Error) error {
	title := errorTitles[status]
	if title == "" {
		title = http.StatusText(status)
	}
	msg := e.Message
	if status == http.StatusNotFound && e.Message == "no such route" {
		msg = "There is no page at this address."
	}
	return render(c, status, views.ErrorPage(d.pageFor(c, title, ""), status, title, msg))
}
