package driver

import (
	"database/sql/driver"
	"errors"
	"io"
	"net"
)

// ErrorKind is what a database's error means to the services above the
// seam. Each driver classifies its own database's errors (Driver.
// ClassifyError), so that business code never sees a driver's error type.
type ErrorKind int

const (
	// ErrorOther is any other failure: a statement the database refused,
	// which is a bug rather than an outage.
	ErrorOther ErrorKind = iota
	// ErrorUnavailable is a failure of the database itself: down,
	// unreachable, shutting down, out of resources, busy, or a transaction
	// it could not serialize. Callers answer it with 503.
	ErrorUnavailable
	// ErrorDeadlock is a statement or transaction the database aborted to
	// break a deadlock: unavailable too, and safe to run again when it is
	// conditional.
	ErrorDeadlock
)

// ConnectionFailed reports whether err is database/sql's or the network's
// way of saying a connection failed, whichever the database: for the
// drivers' ClassifyError.
func ConnectionFailed(err error) bool {
	var netErr net.Error
	return errors.As(err, &netErr) || errors.Is(err, driver.ErrBadConn) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}
