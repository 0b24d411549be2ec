package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"syscall"
)

// Classification is what an error of a guarded call says about its effect.
type Classification string

// The classifications (sdk/vectors.json, "outcomes").
const (
	// ClassFailed: the effect provably did not happen, and the action ends
	// failed (the next call for the key replays the failure).
	ClassFailed Classification = "failed"
	// ClassFailedRetriable: the effect provably did not happen, and the next
	// intent for the key gets a new attempt.
	ClassFailedRetriable Classification = "failed_retriable"
	// ClassOutcomeUnknown: the effect may have happened (a timeout, a lost
	// connection, an error nobody can read). The guard reports
	// outcome_unknown: the action is timed_out at once, and a lookup, then a
	// person, finds out what happened.
	ClassOutcomeUnknown Classification = "outcome_unknown"
)

// NotDone is an error that proves the effect did not happen: the provider
// refused the request, the input was invalid, a precondition failed.
// Return it (or wrap it) from a guarded function to have the failure
// recorded as failed; with Retriable the next intent for the key gets a new
// attempt instead of a replay of the failure. Any other error, unless the
// guard's classification says otherwise, is recorded outcome_unknown.
//
//	return nil, "", &client.NotDone{Err: err}
type NotDone struct {
	Err       error
	Retriable bool
}

func (e *NotDone) Error() string {
	if e.Err == nil {
		return "not done"
	}
	return e.Err.Error()
}

func (e *NotDone) Unwrap() error { return e.Err }

// HTTPStatusError is a downstream system's answer with a non-2xx status,
// for a guarded function to return. The status proves nothing by itself:
// the guard records failed only for the statuses the tool maps as not done
// (GuardSpec.NotDoneStatuses), and outcome_unknown for any other (a 500
// may come after the effect).
type HTTPStatusError struct {
	StatusCode int
	// Message is what the downstream said (an excerpt of its body).
	Message string
}

func (e *HTTPStatusError) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("HTTP %d %s", e.StatusCode, http.StatusText(e.StatusCode))
	}
	return fmt.Sprintf("HTTP %d: %s", e.StatusCode, e.Message)
}

// errorKind names the errors whose kind prefixes the entry's error text.
type errorKind string

const (
	kindTimeout           errorKind = "timeout"
	kindConnectionLost    errorKind = "connection lost"
	kindConnectionRefused errorKind = "connection refused"
)

// kindOf says whether err is a timeout, a connection lost after the request
// may have left, or a connection refused before anything was sent; "" for
// any other error.
func kindOf(err error) errorKind {
	if errors.Is(err, syscall.ECONNREFUSED) {
		return kindConnectionRefused
	}
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) ||
		(errors.As(err, &ne) && ne.Timeout()) {
		return kindTimeout
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNABORTED) || errors.Is(err, net.ErrClosed) {
		return kindConnectionLost
	}
	return ""
}

// DefaultClassify is the shared rule (sdk/vectors.json, "outcomes") for an
// error of a guarded call, with notDone the downstream HTTP statuses the
// tool maps as not done:
//
//   - Unknown(err): outcome unknown;
//   - a *NotDone: failed, retriable as it says; Retriable(err): failed,
//     retriable;
//   - a connection refused (nothing was sent): failed, retriable;
//   - an *HTTPStatusError whose status is in notDone: failed;
//   - anything else (timeouts, lost connections, errors of no known kind,
//     a bug in the tool): outcome unknown.
func DefaultClassify(err error, notDone []int) Classification {
	if IsUnknown(err) {
		return ClassOutcomeUnknown
	}
	var nd *NotDone
	if errors.As(err, &nd) {
		if nd.Retriable {
			return ClassFailedRetriable
		}
		return ClassFailed
	}
	if IsRetriable(err) {
		return ClassFailedRetriable
	}
	if kindOf(err) == kindConnectionRefused {
		return ClassFailedRetriable
	}
	var hs *HTTPStatusError
	if errors.As(err, &hs) && slices.Contains(notDone, hs.StatusCode) {
		return ClassFailed
	}
	return ClassOutcomeUnknown
}

// classify applies the spec's classifier (or the default rule) to err. A
// classifier that panics or returns something else counts as outcome
// unknown.
func (s *GuardSpec) classify(err error) (c Classification) {
	if s.Classify == nil {
		return DefaultClassify(err, s.NotDoneStatuses)
	}
	defer func() {
		if recover() != nil {
			c = ClassOutcomeUnknown
		}
	}()
	switch c := s.Classify(err); c {
	case ClassFailed, ClassFailedRetriable, ClassOutcomeUnknown:
		return c
	}
	return ClassOutcomeUnknown
}

// outcomeErrorText is the entry's error for err: its message, prefixed by
// its kind for timeouts and lost connections ("timeout: context deadline
// exceeded").
func outcomeErrorText(err error) string {
	switch k := kindOf(err); k {
	case kindTimeout, kindConnectionLost:
		return errorText(fmt.Errorf("%s: %w", k, err))
	}
	return errorText(err)
}
