package services

import (
	"errors"
	"fmt"

	"github.com/arbiter-ledger/arbiter/services/record"
)

// Error is a failure the caller can act on. Code is stable, lower_snake_case
// and documented in the OpenAPI document; web/ maps it to an HTTP status.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// Limits are the limits that denied an intent (limit_exceeded), with
	// their groups' use when it came.
	Limits []record.ApprovalLimit `json:"limits,omitempty"`
	// RetryAfter is how many seconds to wait before asking again (frozen),
	// also said in the Retry-After header of a single entry's answer.
	RetryAfter int `json:"retry_after,omitempty"`
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Is makes errors.Is(err, ErrNotFound) match any *Error with the same code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Errorf returns an *Error with the given code.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// The error codes. Each one is documented in the OpenAPI document.
const (
	CodeInvalid              = "invalid"
	CodeInvalidJSON          = "invalid_json"
	CodeBodyTooLarge         = "body_too_large"
	CodeTooManyEntries       = "too_many_entries"
	CodeUnsupportedMediaType = "unsupported_media_type"
	CodeUnauthorized         = "unauthorized"
	CodeForbidden            = "forbidden"
	CodeNotFound             = "not_found"
	CodeKeyReused            = "key_reused"
	CodeStaleAttempt         = "stale_attempt"
	CodeLeaseLost            = "lease_lost"
	CodeInvalidTransition    = "invalid_transition"
	CodeVersionConflict      = "version_conflict"
	CodeAlreadyApproved      = "already_approved"
	// CodeApprovalExpired refuses an approve after the approval's
	// expires_at.
	CodeApprovalExpired = "approval_expired"
	// CodeApproverUnknown refuses an approval by a key that belongs to no
	// person: approvals count people.
	CodeApproverUnknown = "approver_unknown"
	CodeInvalidPolicy   = "invalid_policy"
	// CodeInvalidLimit refuses a limit whose CEL does not compile to the
	// type its field needs.
	CodeInvalidLimit = "invalid_limit"
	// CodeLimitExceeded answers a first intent a deny limit refused.
	CodeLimitExceeded = "limit_exceeded"
	// CodeFrozen answers an intent an active freeze holds back.
	CodeFrozen = "frozen"
	// CodeInvalidBreaker refuses a breaker whose numbers are out of range.
	CodeInvalidBreaker              = "invalid_breaker"
	CodeDuplicateRiskUnacknowledged = "duplicate_risk_unacknowledged"
	CodeConflict                    = "conflict"
	CodeUnavailable                 = "unavailable"
	CodeInternal                    = "internal"
	CodeMethodNotAllowed            = "method_not_allowed"
	// CodeTooManyAttempts answers a throttled sign-in.
	CodeTooManyAttempts = "too_many_attempts"
	// CodeTooManyMatched refuses a bulk decision allowed on more actions
	// than its max_count, or a filter matching more than MaxBulkExamined.
	CodeTooManyMatched = "too_many_matched"
)

// Sentinels for errors.Is.
var (
	ErrInvalid                     = &Error{Code: CodeInvalid}
	ErrNotFound                    = &Error{Code: CodeNotFound}
	ErrForbidden                   = &Error{Code: CodeForbidden}
	ErrUnauthorized                = &Error{Code: CodeUnauthorized}
	ErrKeyReused                   = &Error{Code: CodeKeyReused}
	ErrStaleAttempt                = &Error{Code: CodeStaleAttempt}
	ErrLeaseLost                   = &Error{Code: CodeLeaseLost}
	ErrInvalidTransition           = &Error{Code: CodeInvalidTransition}
	ErrVersionConflict             = &Error{Code: CodeVersionConflict}
	ErrDuplicateRiskUnacknowledged = &Error{Code: CodeDuplicateRiskUnacknowledged}
	ErrConflict                    = &Error{Code: CodeConflict}
	// ErrUnavailable wraps database failures that are not the caller's fault:
	// the database is down or unreachable. It maps to 503.
	ErrUnavailable = errors.New("database unavailable")
)

// AsError returns err as an *Error if it is one.
func AsError(err error) (*Error, bool) {
	var e *Error
	if errors.As(err, &e) {
		return e, true
	}
	return nil, false
}
