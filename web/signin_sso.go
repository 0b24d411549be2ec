package web

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/accounts"
	"github.com/arbiter-ledger/arbiter/services/sso"
)

// ssoProvider is the OpenID Connect sign-in the pages drive.
type ssoProvider interface {
	Begin(ctx context.Context, redirectURL, next string) (authURL, state string, err error)
	Finish(ctx context.Context, redirectURL, state, code string) (sso.Result, error)
	RoleClaim() string
}

// identitySignIn opens a session for a person the provider vouched for.
type identitySignIn interface {
	SignInIdentity(ctx context.Context, id accounts.Identity, g accounts.Grants, address, userAgent string) (accounts.Session, error)
	SignOut(ctx context.Context, token string) error
}

// ssoPages serve single sign-on: a link sends the browser to the
// provider, which sends it back to the callback.
type ssoPages struct {
	*signinPages
	sso       ssoProvider
	identity  identitySignIn
	publicURL string
	log       *slog.Logger
}

const (
	ssoCallbackPath = "/signin/sso/callback"
	// ssoCookie holds the state of the sign-in this browser started: the
	// callback must bring the same one, so nobody can finish a sign-in of
	// theirs in someone else's browser.
	ssoCookie = "arbiter_sso"
)

// begin starts a sign-in at the provider (GET /signin/sso?next=). It
// needs no CSRF token: it only sends this browser to the provider, and
// whoever signs in there is who this browser becomes. With fresh=1 (a
// person confirming who they are before a sensitive change) the provider
// is asked to authenticate them again whatever session it has
// (prompt=login, max_age=0, which also makes it state auth_time); the
// session opened counts as authenticated when the provider says they did
// (accounts.Identity.AuthTime), so a provider that passes them through
// anyway leaves the change still asking.
func (h *ssoPages) begin(c echo.Context) error {
	next := safeNext(c.QueryParam("next"))
	authURL, state, err := h.sso.Begin(c.Request().Context(), h.callbackURL(c), next)
	if err != nil {
		return err
	}
	if c.QueryParam("fresh") == "1" {
		if authURL, err = freshLogin(authURL); err != nil {
			return err
		}
	}
	h.cookies.set(c, ssoCookie, state, sso.LoginTimeout)
	return c.Redirect(http.StatusSeeOther, authURL)
}

// callback is where the provider sends the browser back, by GET: the state
// it carries must be this browser's and unused (it is used up here), and
// only then is the code exchanged. A refusal shows the sign-in page with
// the reason and opens no session.
func (h *ssoPages) callback(c echo.Context) error {
	r := c.Request()
	state := r.URL.Query().Get("state")
	bound := tokensEqual(state, h.cookies.get(c, ssoCookie))
	h.cookies.set(c, ssoCookie, "", -1)
	if e := r.URL.Query().Get("error"); e != "" {
		h.log.Warn("web: the identity provider refused a sign-in", "error", clip(e), "description", clip(r.URL.Query().Get("error_description")))
		return h.refuse(c, sso.ErrProviderRefused)
	}
	if !bound {
		return h.refuse(c, sso.ErrStateUnknown)
	}
	res, err := h.sso.Finish(r.Context(), h.callbackURL(c), state, r.URL.Query().Get("code"))
	if err != nil {
		if _, ok := services.AsError(err); ok {
			h.log.Warn("web: single sign-on refused", "err", err)
		}
		return h.refuse(c, err)
	}
	s, err := h.identity.SignInIdentity(r.Context(), res.Identity, res.Grants, c.RealIP(), r.UserAgent())
	if err != nil && err == error(accounts.ErrNoRole) {
		h.log.Warn("web: single sign-on gives no role", "issuer", res.Identity.Issuer, "subject", res.Identity.Subject,
			"email", res.Identity.Email, "claim", h.sso.RoleClaim(), "values", res.Claim)
		return h.refuse(c, services.Errorf(services.CodeForbidden, "%s", noRoleMessage(res, h.sso.RoleClaim())))
	}
	if err != nil {
		return h.refuse(c, err)
	}
	// A session this browser had (confirming who one is, or another
	// account) ends: the new one replaces it.
	if old := h.cookies.get(c, sessionCookie); old != "" {
		if err := h.identity.SignOut(r.Context(), old); err != nil {
			return err
		}
	}
	h.cookies.set(c, signinCookie, "", -1)
	h.cookies.set(c, sessionCookie, s.Token, h.absolute)
	return c.Redirect(http.StatusSeeOther, safeNext(res.Next))
}

// freshLogin asks the provider to authenticate the person again.
func freshLogin(authURL string) (string, error) {
	u, err := url.Parse(authURL)
	if err != nil {
		return "", fmt.Errorf("web: the provider's authorization URL: %w", err)
	}
	q := u.Query()
	q.Set("prompt", "login")
	q.Set("max_age", "0")
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// refuse shows the sign-in page with why single sign-on failed; errors
// that are not a person's (the database) go to the error handler.
func (h *ssoPages) refuse(c echo.Context, err error) error {
	e, ok := services.AsError(err)
	if !ok {
		return err
	}
	status, found := statusOf[e.Code]
	if !found || status >= 500 {
		return err
	}
	return h.show(c, status, "", "", e.Message)
}

func noRoleMessage(res sso.Result, claim string) string {
	who := res.Identity.Email
	if who == "" {
		who = "Your account"
	}
	values := "nothing"
	if len(res.Claim) > 0 {
		values = strings.Join(res.Claim, ", ")
	}
	return fmt.Sprintf("%s at the identity provider gives you no role in Arbiter: its claim %q holds %s, which the group mapping does not name. Ask an administrator to map one of your groups.",
		who, claim, values)
}

// callbackURL is where the provider sends browsers back: under the public
// URL when one is set (it must be registered at the provider), else under
// the address the browser used.
func (h *ssoPages) callbackURL(c echo.Context) string {
	if h.publicURL != "" {
		return strings.TrimRight(h.publicURL, "/") + ssoCallbackPath
	}
	scheme := "http"
	if c.Request().TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + c.Request().Host + ssoCallbackPath
}

// ssoReturn is where a user confirming who they are through the provider
// comes back to: the page of the form they posted (a GET of the path the
// form posted to is not always a page).
func ssoReturn(path string) string {
	switch {
	case strings.HasPrefix(path, "/admin/users/"):
		return "/admin/users"
	case strings.HasPrefix(path, "/admin/keys/"):
		return "/admin/keys"
	}
	for _, verb := range []string{"/rotate", "/delete"} {
		path = strings.TrimSuffix(path, verb)
	}
	return safeNext(path)
}
