package web

import (
	"fmt"
	"log/slog"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"
)

const logErrKey = "arbiter.err"

// MaxLogValueBytes bounds a client-supplied value in a log line (a path, a
// request id, an error message that quotes the request): a 600 KB value
// per anonymous request made the log itself the attack.
const MaxLogValueBytes = 1 << 10

// clip cuts s to MaxLogValueBytes on a character boundary, saying how long
// it was.
func clip(s string) string {
	if len(s) <= MaxLogValueBytes {
		return s
	}
	cut := MaxLogValueBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s…(%d bytes)", s[:cut], len(s))
}

// MaxRequestIDBytes bounds a request id that is echoed back.
const MaxRequestIDBytes = 128

// screenRequestID drops a client's X-Request-Id that is longer than
// MaxRequestIDBytes or not printable ASCII (no space), so echo's RequestID
// middleware, which runs next, makes a new one: the id is echoed back as a
// header, and a huge or odd one is a header some clients cannot parse.
func screenRequestID(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Request().Header
		if id := h.Get(echo.HeaderXRequestID); id != "" && !printableID(id) {
			h.Del(echo.HeaderXRequestID)
		}
		return next(c)
	}
}

func printableID(id string) bool {
	if len(id) > MaxRequestIDBytes {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] <= ' ' || id[i] > '~' {
			return false
		}
	}
	return true
}

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
			// The method is one net/http accepted (a token, but of any
			// length); path, request id and error may hold what the client
			// sent.
			attrs := []any{"method", clip(c.Request().Method), "path", clip(c.Request().URL.Path), "route", route,
				"status", status, "duration_ms", float64(d.Microseconds()) / 1000, "request_id", clip(c.Response().Header().Get(echo.HeaderXRequestID))}
			if p := principal(c); p.ID != "" {
				attrs = append(attrs, "principal", p.Name, "namespace", p.Namespace)
			}
			if e, ok := c.Get(logErrKey).(error); ok && status >= 400 {
				attrs = append(attrs, "err", clip(e.Error()))
			}
			log.Log(c.Request().Context(), level, "request", attrs...)
			return nil
		}
	}
}
