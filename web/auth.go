package web

import (
	"context"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/arbiter-ledger/arbiter/services"
)

// authenticator is what the API-key middleware needs.
type authenticator interface {
	Authenticate(ctx context.Context, secret string) (services.Principal, error)
}

const principalKey = "arbiter.principal"

// requireAPIKey authenticates `Authorization: Bearer ak_…` and stores the
// principal in the context.
func requireAPIKey(keys authenticator) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			h := c.Request().Header.Get("Authorization")
			scheme, secret, _ := strings.Cut(h, " ")
			if h != "" && !strings.EqualFold(scheme, "Bearer") {
				return services.Errorf(services.CodeUnauthorized, "use Authorization: Bearer ak_…")
			}
			p, err := keys.Authenticate(c.Request().Context(), strings.TrimSpace(secret))
			if err != nil {
				return err
			}
			c.Set(principalKey, p)
			return next(c)
		}
	}
}

func principal(c echo.Context) services.Principal {
	p, _ := c.Get(principalKey).(services.Principal)
	return p
}
