package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// Error is an answer from Arbiter that is not a success: a non-2xx status,
// or a rejected entry. Code is stable and lower_snake_case (key_reused,
// lease_lost, not_found, …; see the OpenAPI document); match on it, not on
// Message.
type Error struct {
	// StatusCode is the HTTP status of the answer; 0 for an entry rejected
	// inside a batch (the batch itself was answered 200).
	StatusCode int    `json:"-"`
	Code       string `json:"code"`
	Message    string `json:"message"`
	// Limits are the limits that denied an intent (Code limit_exceeded),
	// with their groups' use when it came.
	Limits []ApprovalLimit `json:"limits,omitempty"`
	// RetryAfter is how many seconds to wait before asking again (Code
	// frozen).
	RetryAfter int `json:"retry_after,omitempty"`
}

func (e *Error) Error() string {
	if e.StatusCode == 0 {
		return fmt.Sprintf("arbiter: %s: %s", e.Code, e.Message)
	}
	return fmt.Sprintf("arbiter: %s: %s (HTTP %d)", e.Code, e.Message, e.StatusCode)
}

// NetworkError is a request that got no answer: Arbiter could not be
// reached, the connection broke, or the request ran out of time.
type NetworkError struct {
	Method, Path string
	Err          error
}

func (e *NetworkError) Error() string {
	return fmt.Sprintf("arbiter: %s %s: no answer: %v", e.Method, e.Path, e.Err)
}

func (e *NetworkError) Unwrap() error { return e.Err }

// IsCode reports whether err is (or wraps) an *Error with the given code.
func IsCode(err error, code string) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}

// IsUnavailable reports whether err means Arbiter could not be asked: a
// network failure, or an answer saying it is unavailable (503, or 502 and
// 504 from a proxy in front of it). Such requests are safe to retry later:
// every entry is idempotent by its key and attempt.
func IsUnavailable(err error) bool {
	var ne *NetworkError
	if errors.As(err, &ne) {
		return true
	}
	var e *Error
	if !errors.As(err, &e) {
		return false
	}
	switch e.StatusCode {
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return e.Code == "unavailable"
}

// answerError reads the error body {"error": {"code", "message"}} of a
// non-2xx answer. An answer that is not Arbiter's (a proxy's HTML page)
// still becomes an *Error, with the status and an excerpt of the body.
func answerError(status int, body []byte) *Error {
	var wrapper struct {
		Error *Error `json:"error"`
	}
	if json.Unmarshal(body, &wrapper) == nil && wrapper.Error != nil && wrapper.Error.Code != "" {
		wrapper.Error.StatusCode = status
		return wrapper.Error
	}
	code := "unexpected_answer"
	switch status {
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		code = "unavailable"
	}
	msg := strings.TrimSpace(string(body))
	if len(msg) > 200 {
		msg = msg[:200] + "…"
	}
	if msg == "" {
		msg = http.StatusText(status)
	}
	return &Error{StatusCode: status, Code: code, Message: msg}
}
