package web

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/views"
)

// statusOf maps an error code to its HTTP status. Codes not listed are 400.
var statusOf = map[string]int{
	services.CodeInvalid:                     http.StatusBadRequest,
	services.CodeInvalidJSON:                 http.StatusBadRequest,
	services.CodeTooManyEntries:              http.StatusBadRequest,
	services.CodeBodyTooLarge:                http.StatusRequestEntityTooLarge,
	services.CodeUnsupportedMediaType:        http.StatusUnsupportedMediaType,
	services.CodeUnauthorized:                http.StatusUnauthorized,
	services.CodeForbidden:                   http.StatusForbidden,
	services.CodeNotFound:                    http.StatusNotFound,
	services.CodeMethodNotAllowed:            http.StatusMethodNotAllowed,
	services.CodeKeyReused:                   http.StatusUnprocessableEntity,
	services.CodeDuplicateRiskUnacknowledged: http.StatusUnprocessableEntity,
	services.CodeStaleAttempt:                http.StatusConflict,
	services.CodeLeaseLost:                   http.StatusConflict,
	services.CodeInvalidTransition:           http.StatusConflict,
	services.CodeVersionConflict:             http.StatusConflict,
	services.CodeAlreadyApproved:             http.StatusConflict,
	services.CodeApprovalExpired:             http.StatusConflict,
	services.CodeApproverUnknown:             http.StatusForbidden,
	services.CodeInvalidPolicy:               http.StatusBadRequest,
	services.CodeInvalidLimit:                http.StatusBadRequest,
	services.CodeLimitExceeded:               http.StatusConflict,
	services.CodeFrozen:                      http.StatusConflict,
	services.CodeInvalidBreaker:              http.StatusBadRequest,
	services.CodeConflict:                    http.StatusConflict,
	services.CodeTooManyMatched:              http.StatusConflict,
	services.CodeUnavailable:                 http.StatusServiceUnavailable,
	services.CodeInternal:                    http.StatusInternalServerError,
}

// errorBody is the shape of every error answer.
type errorBody struct {
	Error *services.Error `json:"error"`
}

// toAPIError turns any error into a coded error and its status.
func toAPIError(err error) (int, *services.Error) {
	if e, ok := services.AsError(err); ok {
		st, ok := statusOf[e.Code]
		if !ok {
			st = http.StatusBadRequest
		}
		return st, e
	}
	var he *echo.HTTPError
	if errors.As(err, &he) {
		switch he.Code {
		case http.StatusNotFound:
			return he.Code, services.Errorf(services.CodeNotFound, "no such route")
		case http.StatusMethodNotAllowed:
			return he.Code, services.Errorf(services.CodeMethodNotAllowed, "method not allowed on this route")
		case http.StatusRequestEntityTooLarge:
			return he.Code, services.Errorf(services.CodeBodyTooLarge, "the request body is over the limit")
		case http.StatusUnauthorized:
			return he.Code, services.Errorf(services.CodeUnauthorized, "%v", he.Message)
		}
		if he.Code < 500 {
			return he.Code, services.Errorf(services.CodeInvalid, "%v", he.Message)
		}
	}
	if errors.Is(err, services.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) {
		return http.StatusServiceUnavailable, services.Errorf(services.CodeUnavailable,
			"the database is unavailable; retry with backoff (nothing acknowledged was lost)")
	}
	return http.StatusInternalServerError, services.Errorf(services.CodeInternal, "internal error; it has been logged")
}

// refusal is a refused request as a page shows it in place (in a panel, in
// its form) rather than on the error page: the status and code toAPIError
// gives it, the error's own message, and the words for a person.
type refusal struct {
	status  int
	code    string
	message string
	text    string // views.RefusalText
}

// refusalOf maps err with toAPIError for a page that shows refusals in
// place. ok is false for a failure the error handler must answer and log:
// a 5xx, except the database away (503), which a page can say in words.
func refusalOf(err error) (r refusal, ok bool) {
	status, e := toAPIError(err)
	if status >= http.StatusInternalServerError && status != http.StatusServiceUnavailable {
		return refusal{}, false
	}
	return refusal{status: status, code: e.Code, message: e.Message, text: views.RefusalText(e.Code, e.Message)}, true
}

// errorHandler answers every error returned by a handler, and logs it once:
// 5xx at error level, 4xx at warn.
func errorHandler(log *slog.Logger, dash *dashboard) echo.HTTPErrorHandler {
	return func(err error, c echo.Context) {
		status, e := toAPIError(err)
		c.Set(logErrKey, err)
		if c.Response().Committed {
			return
		}
		if status == http.StatusUnauthorized {
			c.Response().Header().Set("WWW-Authenticate", `Bearer realm="arbiter"`)
		}
		if status == http.StatusServiceUnavailable {
			c.Response().Header().Set("Retry-After", "1")
		}
		var werr error
		if wantsHTML(c) && c.Request().Method != http.MethodHead {
			werr = dash.errorPage(c, status, e)
		} else if c.Request().Method == http.MethodHead {
			werr = c.NoContent(status)
		} else {
			werr = c.JSON(status, errorBody{Error: e})
		}
		if werr != nil {
			log.Error("web: write error response", "err", werr)
		}
	}
}
