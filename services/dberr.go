package services

import (
	"context"
	"errors"
	"fmt"

	"github.com/arbiter-ledger/arbiter/services/driver"
	"github.com/arbiter-ledger/arbiter/services/driver/pgdriver"
	"github.com/arbiter-ledger/arbiter/services/driver/sqlitedriver"
)

// DBError wraps a database failure. Failures of the database itself (down,
// unreachable, shutting down, out of resources, busy) become ErrUnavailable,
// which callers answer with 503; anything else is a bug and stays an internal
// error.
func DBError(what string, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: %w", what, err)
	}
	if Unavailable(err) {
		return fmt.Errorf("%w: %s: %w", ErrUnavailable, what, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// Unavailable reports whether err is a failure of the database itself:
// down, unreachable, shutting down, out of resources or busy. The drivers
// say: an error comes from one database, and only that database's driver
// knows its errors, so each is asked (DBError is called without a Store).
func Unavailable(err error) bool {
	for _, classify := range [...]func(error) driver.ErrorKind{pgdriver.ClassifyError, sqlitedriver.ClassifyError} {
		if classify(err) != driver.ErrorOther {
			return true
		}
	}
	return false
}
