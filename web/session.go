package web

import (
	"context"
	"crypto/subtle"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/arbiter-ledger/arbiter/services/accounts"

	"github.com/labstack/echo/v4"

	"github.com/arbiter-ledger/arbiter/models"
	"github.com/arbiter-ledger/arbiter/services"
)

// sessionStore is what the dashboard's session handling needs.
type sessionStore interface {
	Session(ctx context.Context, token string) (accounts.Session, error)
	SignIn(ctx context.Context, email, password, address, userAgent string) (accounts.Session, error)
	SignOut(ctx context.Context, token string) error
}

// servedOverTLS reports whether people reach the service over https, by
// the public URL's scheme (url.Parse lowercases it): the one check behind
// both HSTS and Secure cookies, so "HTTPS://" turns on both.
func servedOverTLS(publicURL string) bool {
	u, err := url.Parse(strings.TrimSpace(publicURL))
	return err == nil && u.Scheme == "https"
}

// cookies names and writes the dashboard's cookies. Over TLS, or when the
// public URL is https, cookies are Secure and carry the __Host- prefix, which
// pins them to this host and path /.
type cookies struct {
	secure bool
}

func (k cookies) name(base string) string {
	if k.secure {
		return "__Host-" + base
	}
	return base
}

func (k cookies) set(c echo.Context, base, value string, maxAge time.Duration) {
	ck := &http.Cookie{Name: k.name(base), Value: value, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteLaxMode, Secure: k.secure || c.Request().TLS != nil}
	switch {
	case maxAge < 0:
		ck.MaxAge = -1
	case maxAge > 0:
		ck.MaxAge = int(maxAge.Seconds())
	}
	c.SetCookie(ck)
}

func (k cookies) get(c echo.Context, base string) string {
	ck, err := c.Cookie(k.name(base))
	if err != nil {
		return ""
	}
	return ck.Value
}

const (
	sessionCookie = "arbiter_session"
	signinCookie  = "arbiter_signin" // CSRF token of the sign-in form, before a session exists
	flashCookie   = "arbiter_flash"
	sessionKey    = "arbiter.session"
)

// loadSession attaches the signed-in user, if any, to the request.
func loadSession(store sessionStore, k cookies) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			token := k.get(c, sessionCookie)
			if token == "" {
				return next(c)
			}
			s, err := store.Session(c.Request().Context(), token)
			switch {
			case errors.Is(err, services.ErrUnauthorized):
				k.set(c, sessionCookie, "", -1)
			case err != nil:
				return err
			default:
				c.Set(sessionKey, s)
				c.Set(principalKey, s.Principal())
			}
			return next(c)
		}
	}
}

func currentSession(c echo.Context) (accounts.Session, bool) {
	s, ok := c.Get(sessionKey).(accounts.Session)
	return s, ok
}

func currentUser(c echo.Context) (models.User, bool) {
	s, ok := currentSession(c)
	return s.User, ok
}

// requireUser sends anonymous visitors to the sign-in page, coming back to
// where they were going afterwards.
func requireUser(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if _, ok := currentSession(c); ok {
			return next(c)
		}
		target := "/signin"
		if c.Request().Method == http.MethodGet {
			target += "?next=" + url.QueryEscape(c.Request().URL.RequestURI())
		}
		if c.Request().Header.Get("HX-Request") == "true" {
			c.Response().Header().Set("HX-Redirect", target)
			return c.NoContent(http.StatusUnauthorized)
		}
		return c.Redirect(http.StatusSeeOther, target)
	}
}

// requireRole refuses users below the given role with 403.
func requireRole(roles ...services.Role) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			u, _ := currentUser(c)
			for _, r := range roles {
				if services.Role(u.Role) == r {
					return next(c)
				}
			}
			return services.Errorf(services.CodeForbidden, "your role (%s) may not do this", u.Role)
		}
	}
}

// checkCSRF guards every state-changing dashboard request: the form field
// csrf_token or the X-CSRF-Token header (htmx) must match the session's
// token, and a cross-origin request is refused outright.
func checkCSRF(origins *originCheck) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := c.Request()
			switch r.Method {
			case http.MethodGet, http.MethodHead, http.MethodOptions:
				return next(c)
			}
			if !origins.allows(r) {
				return services.Errorf(services.CodeForbidden, "cross-site request refused")
			}
			s, ok := currentSession(c)
			if !ok {
				return next(c) // requireUser answers
			}
			if !tokensEqual(csrfToken(c), s.CSRF) {
				return services.Errorf(services.CodeForbidden, "the form has expired or did not come from this site; reload the page and try again")
			}
			return next(c)
		}
	}
}

// csrfToken is the token a request carries in the X-CSRF-Token header or the
// form body; never the query string, which leaks into logs and Referer.
func csrfToken(c echo.Context) string {
	if h := c.Request().Header.Get("X-CSRF-Token"); h != "" {
		return h
	}
	return c.Request().PostFormValue("csrf_token")
}

func tokensEqual(a, b string) bool {
	return a != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// originCheck refuses cross-origin browser requests. Go's
// http.CrossOriginProtection does the work (Sec-Fetch-Site, then Origin
// against Host); it cannot know the scheme the browser used behind a
// TLS-terminating proxy, so with a public URL an Origin must also have its
// scheme.
type originCheck struct {
	cop    *http.CrossOriginProtection
	scheme string // the public URL's scheme, or "" when none is set
}

func newOriginCheck(publicURL string) *originCheck {
	o := &originCheck{cop: http.NewCrossOriginProtection()}
	if u, err := url.Parse(publicURL); err == nil && u.Host != "" {
		o.scheme = strings.ToLower(u.Scheme)
	}
	return o
}

func (o *originCheck) allows(r *http.Request) bool {
	if o.cop.Check(r) != nil {
		return false
	}
	origin := r.Header.Get("Origin")
	if o.scheme == "" || origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	return err == nil && strings.EqualFold(u.Scheme, o.scheme)
}

// flash stores a one-line notice for the next page the browser shows.
func (k cookies) flash(c echo.Context, msg string) {
	k.set(c, flashCookie, url.QueryEscape(msg), time.Minute)
}

// takeFlash returns and clears the pending notice.
func (k cookies) takeFlash(c echo.Context) string {
	v := k.get(c, flashCookie)
	if v == "" {
		return ""
	}
	k.set(c, flashCookie, "", -1)
	msg, _ := url.QueryUnescape(v)
	return msg
}
