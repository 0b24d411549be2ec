package services

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/glebarez/sqlite"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/arbiter-ledger/arbiter/migrations"
)

// Dialect names the database behind a Store.
type Dialect string

const (
	Postgres Dialect = "postgres"
	SQLite   Dialect = "sqlite"
)

// DefaultDatabaseURL is used when ARBITER_DATABASE_URL is unset.
const DefaultDatabaseURL = "sqlite:arbiter-data/arbiter.db"

// Store is a connection to Arbiter's database. On PostgreSQL one pool serves
// reads and writes. On SQLite, writes go through a single connection so that
// concurrent writers queue in the process instead of failing with "database is
// locked", while reads use their own pool (WAL lets them run beside a write).
type Store struct {
	Dialect Dialect
	// Where is the database location without credentials, for logs.
	Where string

	db  *gorm.DB // reads; on PostgreSQL also writes
	wdb *gorm.DB // writes
	rsq *sql.DB
	wsq *sql.DB

	authOnce sync.Once
	auth     *authCache
	tracer   *queryTracer // PostgreSQL only
}

// Open connects to the database named by rawURL ("postgres://…",
// "postgresql://…" or "sqlite:PATH"). It does not change the schema.
func Open(ctx context.Context, rawURL string) (*Store, error) {
	if rawURL == "" {
		rawURL = DefaultDatabaseURL
	}
	cfg := &gorm.Config{Logger: logger.Discard, SkipDefaultTransaction: true, TranslateError: true}
	switch {
	case strings.HasPrefix(rawURL, "postgres://"), strings.HasPrefix(rawURL, "postgresql://"):
		pgcfg, err := pgx.ParseConfig(rawURL)
		if err != nil {
			return nil, fmt.Errorf("store: postgres URL: %v", redactErr(err, rawURL))
		}
		tracer := &queryTracer{}
		pgcfg.Tracer = tracer
		sqldb := stdlib.OpenDB(*pgcfg, stdlib.OptionAfterConnect(registerTypes))
		sqldb.SetMaxOpenConns(32)
		sqldb.SetMaxIdleConns(32)
		sqldb.SetConnMaxIdleTime(5 * time.Minute)
		gdb, err := gorm.Open(postgres.New(postgres.Config{Conn: sqldb}), cfg)
		if err != nil {
			sqldb.Close()
			return nil, fmt.Errorf("store: open postgres: %w", err)
		}
		s := &Store{Dialect: Postgres, Where: redactURL(rawURL), db: gdb, wdb: gdb, rsq: sqldb, wsq: sqldb, tracer: tracer}
		if err := s.Ping(ctx); err != nil {
			s.Close()
			return nil, err
		}
		return s, nil
	case strings.HasPrefix(rawURL, "sqlite:"):
		path := strings.TrimPrefix(rawURL, "sqlite:")
		path = strings.TrimPrefix(path, "//")
		if path == "" {
			return nil, errors.New("store: sqlite: empty path in database URL")
		}
		if dir := filepath.Dir(path); dir != "." {
			if err := os.MkdirAll(dir, 0o750); err != nil {
				return nil, fmt.Errorf("store: sqlite: create %s: %w", dir, err)
			}
		}
		dsn := "file:" + path + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)" +
			"&_pragma=foreign_keys(1)&_pragma=synchronous(FULL)&_time_format=sqlite&_txlock=immediate"
		wdb, err := gorm.Open(sqlite.Open(dsn), cfg)
		if err != nil {
			return nil, fmt.Errorf("store: open sqlite %s: %w", path, err)
		}
		wsq, _ := wdb.DB()
		wsq.SetMaxOpenConns(1)
		rdb, err := gorm.Open(sqlite.Open(dsn+"&_pragma=query_only(1)"), cfg)
		if err != nil {
			wsq.Close()
			return nil, fmt.Errorf("store: open sqlite %s: %w", path, err)
		}
		rsq, _ := rdb.DB()
		rsq.SetMaxOpenConns(8)
		s := &Store{Dialect: SQLite, Where: "sqlite:" + path, db: rdb, wdb: wdb, rsq: rsq, wsq: wsq}
		if err := s.Ping(ctx); err != nil {
			s.Close()
			return nil, err
		}
		return s, nil
	default:
		return nil, fmt.Errorf("store: unsupported database URL %q: use postgres://… or sqlite:PATH", redactURL(rawURL))
	}
}

// redactErr keeps a password out of an error about its URL.
func redactErr(err error, rawURL string) string {
	msg := err.Error()
	if u, perr := url.Parse(rawURL); perr == nil && u.User != nil {
		if pw, ok := u.User.Password(); ok && pw != "" {
			msg = strings.ReplaceAll(msg, pw, "xxxxx")
		}
	}
	return msg
}

// redactURL drops the password from a database URL.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		if err != nil {
			return "(unparseable URL)"
		}
		return raw
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return u.String()
}

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := s.wsq.PingContext(ctx); err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	return nil
}

// Close releases every connection.
func (s *Store) Close() error {
	err := s.wsq.Close()
	if s.rsq != s.wsq {
		err = errors.Join(err, s.rsq.Close())
	}
	return err
}

// migrationsFS returns this dialect's migration files.
func (s *Store) migrationsFS() fs.FS {
	if s.Dialect == Postgres {
		sub, _ := fs.Sub(migrations.Postgres, "postgres")
		return sub
	}
	sub, _ := fs.Sub(migrations.SQLite, "sqlite")
	return sub
}

// rebind turns $1-style placeholders into SQLite's ?1 style.
func (s *Store) rebind(q string) string {
	if s.Dialect == Postgres {
		return q
	}
	return placeholder.ReplaceAllString(q, "?$1")
}

var placeholder = regexp.MustCompile(`\$(\d+)`)
