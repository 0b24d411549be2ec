package web

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/accounts"
	"github.com/arbiter-ledger/arbiter/views"
)

// reauthenticator checks a signed-in user's password again.
type reauthenticator interface {
	Reauthenticate(ctx context.Context, token, password, address string) error
}

// requireRecentAuth guards every admin change of who may do what or of
// what holds actions and tells people (API keys minted or revoked, users
// created, disabled or enabled, roles, memberships, other users' sessions
// ended, approval policies, webhook endpoints): if the session's password
// was given more than accounts.ReauthAfter ago, the change is answered with
// a page asking for it, which posts the same fields back with the password.
// A stolen or unattended session alone cannot make them. when says whether
// a request is such a change (nil: always). The API's admin keys are not
// asked: a key is not a session, and minting one already needed this.
func requireRecentAuth(d *dashboard, store reauthenticator, now func() time.Time, when func(c echo.Context) bool) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			s, ok := currentSession(c)
			if !ok || (when != nil && !when(c)) || now().Sub(s.AuthenticatedAt) < accounts.ReauthAfter {
				return next(c)
			}
			r := c.Request()
			// A user without a usable password confirms at the provider.
			if d.signIn.SSO && (!accounts.HasPassword(s.User) || !d.signIn.Passwords) {
				return render(c, http.StatusUnauthorized, views.Reauthenticate(d.pageFor(c, "Confirm it is you", ""), r.URL.Path, nil, "",
					views.SSOReauth{Only: true, Next: ssoReturn(r.URL.Path)}))
			}
			password := r.PostFormValue("reauth_password")
			var msg string
			if password != "" {
				err := store.Reauthenticate(r.Context(), d.cookies.get(c, sessionCookie), password, c.RealIP())
				if err == nil {
					return next(c)
				}
				e, ok := services.AsError(err)
				if !ok || !errors.Is(err, services.ErrInvalid) {
					return err
				}
				msg = e.Message
			}
			var fields []views.ReauthField
			for name, values := range r.PostForm {
				if name == "csrf_token" || name == "reauth_password" {
					continue
				}
				for _, v := range values {
					fields = append(fields, views.ReauthField{Name: name, Value: v})
				}
			}
			slices.SortStableFunc(fields, func(a, b views.ReauthField) int { return cmp.Compare(a.Name, b.Name) })
			status := http.StatusUnauthorized
			if msg != "" {
				status = http.StatusForbidden
			}
			return render(c, status, views.Reauthenticate(d.pageFor(c, "Confirm your password", ""), r.URL.Path, fields, msg, views.SSOReauth{}))
		}
	}
}
