package web

import (
	"log/slog"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"github.com/arbiter-ledger/arbiter/services"
)

// Deps are what the HTTP surface is built from.
type Deps struct {
	Store   *services.Store
	Ledger  *services.Ledger
	Keys    *services.Keys
	Metrics *Metrics
	Log     *slog.Logger
}

// New returns the HTTP handler with every route. The whole surface reads
// here.
func New(d Deps) *echo.Echo {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = errorHandler(d.Log)
	e.Use(middleware.RequestID())
	e.Use(requestLog(d.Log, d.Metrics))
	e.Use(middleware.RecoverWithConfig(middleware.RecoverConfig{DisableStackAll: true, LogErrorFunc: func(c echo.Context, err error, stack []byte) error {
		d.Log.Error("web: panic", "err", err, "stack", string(stack))
		return err
	}}))
	e.Use(securityHeaders)

	health := &healthHandler{store: d.Store}
	e.GET("/healthz", health.healthz)
	e.GET("/readyz", health.readyz)
	e.GET("/metrics", d.Metrics.handler())
	e.GET("/v1/openapi.json", serveOpenAPI)

	// The API key is checked per route rather than on the group, so that an
	// unknown method on a known path answers 405, not 401 or 404.
	key := requireAPIKey(d.Keys)
	api := e.Group("/v1")
	entries := &entriesHandler{ledger: d.Ledger, metrics: d.Metrics}
	api.POST("/entries", entries.submit, key)
	actions := &actionsHandler{ledger: d.Ledger}
	api.GET("/actions", actions.list, key)
	api.GET("/actions/:id", actions.get, key)
	api.GET("/actions/:id/entries", actions.entries, key)
	api.POST("/actions/:id/decisions", actions.decide, key)
	return e
}

func securityHeaders(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Response().Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		if c.Request().TLS != nil {
			h.Set("Strict-Transport-Security", "max-age=63072000; includeSubDomains")
		}
		return next(c)
	}
}
