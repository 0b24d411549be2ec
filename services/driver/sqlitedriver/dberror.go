package sqlitedriver

import (
	"errors"
	"strings"

	sqlite "github.com/glebarez/go-sqlite"

	"github.com/arbiter-ledger/arbiter/services/driver"
)

// SQLite's primary result codes for a database that is there but cannot be
// used now: busy (another connection holds the write lock past the busy
// timeout), an I/O error, a file that cannot be opened.
const (
	codeBusy     = 5
	codeIOErr    = 10
	codeCantOpen = 14
)

// ClassifyError says what a SQLite error means: by its result code, or by
// the code's text when a caller wrapped the error without keeping it. A nil
// err is ErrorOther.
func ClassifyError(err error) driver.ErrorKind {
	if err == nil {
		return driver.ErrorOther
	}
	var sqErr *sqlite.Error
	if errors.As(err, &sqErr) {
		switch sqErr.Code() & 0xff { // the primary code of an extended one
		case codeBusy, codeIOErr, codeCantOpen:
			return driver.ErrorUnavailable
		}
	}
	if driver.ConnectionFailed(err) {
		return driver.ErrorUnavailable
	}
	// An error with an SQLSTATE is a database server's answer, never
	// SQLite's, whatever its text quotes.
	var coded interface{ SQLState() string }
	if errors.As(err, &coded) {
		return driver.ErrorOther
	}
	msg := err.Error()
	for _, s := range []string{"database is locked", "SQLITE_BUSY", "disk I/O error", "unable to open database"} {
		if strings.Contains(msg, s) {
			return driver.ErrorUnavailable
		}
	}
	return driver.ErrorOther
}

func (d *Driver) ClassifyError(err error) driver.ErrorKind { return ClassifyError(err) }
