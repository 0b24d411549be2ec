package web

import (
	"log/slog"
	"time"

	"github.com/labstack/echo/v4"
)

const logErrKey = "arbiter.err"

// requestLog logs one line per request and feeds the latency histogram.
// Requests answered 5xx log at error level, 4xx at warn, the rest at debug
// for health and metrics probes and info otherwise.
func requestLog(log *slog.Logger, m *Metrics) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			start := time.Now()
			err := next(c)
			if err != nil {
				c.Error(err)
			}
			d := time.Since(start)
			status := c.Response().Status
			route := c.Path()
			if route == "" {
				route = "unmatched"
			}
			m.observe(route, c.Request().Method, status, d)
			level := slog.LevelInfo
			switch {
			case status >= 500:
				level = slog.LevelError
			case status >= 400:
				level = slog.LevelWarn
			case route == "/healthz" || route == "/readyz" || route == "/metrics":
				level = slog.LevelDebug
			case route == "/v1/entries":
				// Accepted entries are in the ledger and counted in the
				// metrics; a log line each would cost the hot path a write.
				level = slog.LevelDebug
			}
			if !log.Enabled(c.Request().Context(), level) {
				return nil
			}
			attrs := []any{"method", c.Request().Method, "path", c.Request().URL.Path, "route", route,
				"status", status, "duration_ms", float64(d.Microseconds()) / 1000, "request_id", c.Response().Header().Get(echo.HeaderXRequestID)}
			if p := principal(c); p.ID != "" {
				attrs = append(attrs, "principal", p.Name, "namespace", p.Namespace)
			}
			if e, ok := c.Get(logErrKey).(error); ok && status >= 400 {
				attrs = append(attrs, "err", e.Error())
			}
			log.Log(c.Request().Context(), level, "request", attrs...)
			return nil
		}
	}
}
