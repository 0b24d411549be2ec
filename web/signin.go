package web

import (
	"errors"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/arbiter-ledger/arbiter/services/accounts"

	"github.com/labstack/echo/v4"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/views"
)

// signinPages serves sign-in and sign-out.
type signinPages struct {
	*dashboard
	accounts sessionStore
	// absolute is the session's absolute lifetime, used as the cookie's.
	absolute time.Duration
}

func (h *signinPages) form(c echo.Context) error {
	if _, ok := currentSession(c); ok {
		return c.Redirect(http.StatusSeeOther, safeNext(c.QueryParam("next")))
	}
	return h.show(c, http.StatusOK, "", c.QueryParam("next"), "")
}

// show renders the form with a fresh pre-session CSRF token, kept in a
// cookie and echoed by the form (double submit).
func (h *signinPages) show(c echo.Context, status int, email, next, errMsg string) error {
	token := accounts.RandomToken(32)
	h.cookies.set(c, signinCookie, token, 30*time.Minute)
	p := h.pageFor(c, "Sign in", "")
	p.CSRF = token
	return render(c, status, views.SignIn(p, email, safeNext(next), errMsg, h.signIn))
}

func (h *signinPages) submit(c echo.Context) error {
	email, next := strings.TrimSpace(c.FormValue("email")), c.FormValue("next")
	if !h.signIn.Passwords {
		return h.show(c, http.StatusForbidden, "", next, "Passwords are turned off here: sign in with single sign-on.")
	}
	if !h.origins.allows(c.Request()) || !tokensEqual(c.Request().PostFormValue("csrf_token"), h.cookies.get(c, signinCookie)) {
		return h.show(c, http.StatusForbidden, email, next, "The sign-in form expired. Please try again.")
	}
	s, err := h.accounts.SignIn(c.Request().Context(), email, c.Request().PostFormValue("password"), c.RealIP(), c.Request().UserAgent())
	var e *services.Error
	if errors.As(err, &e) {
		status := http.StatusUnauthorized
		switch e.Code {
		case services.CodeTooManyAttempts:
			status = http.StatusTooManyRequests
			var th *accounts.ThrottledError
			if errors.As(err, &th) {
				c.Response().Header().Set("Retry-After", strconv.Itoa(max(1, int(math.Ceil(th.RetryAfter.Seconds())))))
			}
		case services.CodeUnavailable:
			status = http.StatusServiceUnavailable
			c.Response().Header().Set("Retry-After", "1")
		}
		return h.show(c, status, email, next, e.Message)
	}
	if err != nil {
		return err
	}
	h.cookies.set(c, signinCookie, "", -1)
	h.cookies.set(c, sessionCookie, s.Token, h.absolute)
	return c.Redirect(http.StatusSeeOther, safeNext(next))
}

func (h *signinPages) signOut(c echo.Context) error {
	if token := h.cookies.get(c, sessionCookie); token != "" {
		if err := h.accounts.SignOut(c.Request().Context(), token); err != nil {
			return err
		}
	}
	h.cookies.set(c, sessionCookie, "", -1)
	h.cookies.flash(c, "You are signed out.")
	return c.Redirect(http.StatusSeeOther, "/signin")
}

// safeNext keeps a post-sign-in redirect on this site.
func safeNext(next string) string {
	u, err := url.Parse(next)
	if next == "" || err != nil || u.IsAbs() || u.Host != "" || !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") ||
		strings.Contains(next, "\\") || strings.HasPrefix(next, "/signin") {
		return "/"
	}
	return next
}
