package services

import (
	"context"

	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/arbiter-ledger/arbiter/services/driver"
	"github.com/arbiter-ledger/arbiter/services/driver/pgdriver"
	"github.com/arbiter-ledger/arbiter/services/driver/sqlitedriver"
)

// Dialect names the database behind a Store: its driver's name.
type Dialect string

const (
	Postgres Dialect = "postgres"
	SQLite   Dialect = "sqlite"
)

// DefaultDatabaseURL is used when ARBITER_DATABASE_URL is unset.
const DefaultDatabaseURL = "sqlite:arbiter-data/arbiter.db"

// Store is a connection to Arbiter's database through its driver: the
// ledger, the sweeper, the triage queue and the dispatcher call the
// driver's operations; configuration records are read and written with
// gorm.
type Store struct {
	Dialect Dialect
	// Where is the database location without credentials, for logs.
	Where string

	drv driver.Driver
	ex  driver.Executor
	db  *gorm.DB // reads of configuration records
	wdb *gorm.DB // writes of configuration records
}

// Open connects to the database named by rawURL ("postgres://…",
// "postgresql://…" or "sqlite:PATH"). It does not change the schema.
func Open(ctx context.Context, rawURL string) (*Store, error) {
	if rawURL == "" {
		rawURL = DefaultDatabaseURL
	}
	cfg := &gorm.Config{Logger: logger.Discard, SkipDefaultTransaction: true, TranslateError: true}
	var (
		drv driver.Driver
		err error
	)
	switch {
	case strings.HasPrefix(rawURL, "postgres://"), strings.HasPrefix(rawURL, "postgresql://"):
		drv, err = pgdriver.Open(ctx, rawURL, cfg)
	case strings.HasPrefix(rawURL, "sqlite:"):
		drv, err = sqlitedriver.Open(strings.TrimPrefix(rawURL, "sqlite:"), cfg)
	default:
		return nil, fmt.Errorf("store: unsupported database URL %q: use postgres://… or sqlite:PATH", pgdriver.RedactURL(rawURL))
	}
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	s := &Store{Dialect: Dialect(drv.Name()), Where: drv.Where(), drv: drv, ex: drv.Executor(),
		db: drv.Gorm(), wdb: drv.GormWriter()}
	if err := s.Ping(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Embedded reports whether the database lives in the process's own files,
// so that `serve` migrates it without being told to.
func (s *Store) Embedded() bool { return s.drv.Embedded() }

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := s.drv.Ping(ctx); err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	return nil
}

// Close releases every connection.
func (s *Store) Close() error { return s.drv.Close() }

// CapturePlans runs fn and returns the query plan of every read it made, by
// SQL text, where the driver can capture them (PostgreSQL); nil elsewhere.
// For tests of index use.
func CapturePlans(s *Store, fn func()) map[string]string {
	c, ok := s.drv.(interface {
		CapturePlans(func()) map[string]string
	})
	if !ok {
		return nil
	}
	return c.CapturePlans(fn)
}

// Driver is the storage driver behind the store, for the shared driver
// test suite.
func (s *Store) Driver() driver.Driver { return s.drv }

// Executor runs the driver's operations, each on its own.
func (s *Store) Executor() driver.Executor { return s.ex }

// Gorm reads configuration records; GormWriter writes them.
func (s *Store) Gorm() *gorm.DB { return s.db }

// GormWriter writes configuration records (the single writer on SQLite).
func (s *Store) GormWriter() *gorm.DB { return s.wdb }
