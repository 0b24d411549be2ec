package services

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
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
// down, unreachable, shutting down, out of resources or busy.
func Unavailable(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code[:2] {
		case "08", "53", "57", "58", "40": // connection, resources, shutdown, system, serialization
			return true
		}
		return false
	}
	var netErr net.Error
	var connErr *pgconn.ConnectError
	if errors.As(err, &netErr) || errors.As(err, &connErr) || errors.Is(err, driver.ErrBadConn) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || pgconn.SafeToRetry(err) {
		return true
	}
	msg := err.Error()
	for _, s := range []string{"conn closed", "connection refused", "database is locked", "SQLITE_BUSY",
		"disk I/O error", "unable to open database", "the database system is"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}
