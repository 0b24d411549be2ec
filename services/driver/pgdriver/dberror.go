package pgdriver

import (
	"errors"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/arbiter-ledger/arbiter/services/driver"
)

// ClassifyError says what a PostgreSQL error means: its SQLSTATE class
// when the server answered, otherwise whether the connection failed. A nil
// err is ErrorOther.
func ClassifyError(err error) driver.ErrorKind {
	if err == nil {
		return driver.ErrorOther
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		if pgErr.Code == "40P01" { // deadlock_detected
			return driver.ErrorDeadlock
		}
		switch pgErr.Code[:2] {
		case "08", "53", "57", "58", "40": // connection, resources, shutdown, system, serialization
			return driver.ErrorUnavailable
		}
		return driver.ErrorOther
	}
	var connErr *pgconn.ConnectError
	if errors.As(err, &connErr) || driver.ConnectionFailed(err) || pgconn.SafeToRetry(err) {
		return driver.ErrorUnavailable
	}
	// pgx reports some failures of the connection or of a server starting
	// or stopping only in their text.
	msg := err.Error()
	for _, s := range []string{"conn closed", "connection refused", "the database system is"} {
		if strings.Contains(msg, s) {
			return driver.ErrorUnavailable
		}
	}
	return driver.ErrorOther
}

func (d *Driver) ClassifyError(err error) driver.ErrorKind { return ClassifyError(err) }
