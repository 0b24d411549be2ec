// Package pgdriver is Arbiter's storage on PostgreSQL: every operation of
// driver.Executor in PostgreSQL's own SQL, with $n placeholders. A change of
// the ledger is one statement (the action, its entry and its alerts in
// data-modifying CTEs); sets of changes come in as arrays.
package pgdriver

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3/lock"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/arbiter-ledger/arbiter/migrations"
	"github.com/arbiter-ledger/arbiter/services/driver"
)

// Driver is a PostgreSQL database: one pool serves reads and writes.
type Driver struct {
	db     *sql.DB
	gdb    *gorm.DB
	where  string
	tracer *queryTracer
	// noEndpoint: the last set of changes written found no enabled webhook
	// endpoint (ActionUpdateMany).
	noEndpoint atomic.Bool
	// groups is each limit group's row as this process last read or wrote
	// it (LimitUseKept).
	groups keptGroups
}

var _ driver.Driver = (*Driver)(nil)

// Open connects to the database at rawURL (postgres://… or
// postgresql://…). It does not change the schema.
func Open(ctx context.Context, rawURL string, cfg *gorm.Config) (*Driver, error) {
	pgcfg, err := pgx.ParseConfig(rawURL)
	if err != nil {
		return nil, fmt.Errorf("pgdriver: postgres URL: %v", redactErr(err, rawURL))
	}
	tracer := &queryTracer{}
	pgcfg.Tracer = tracer
	db := stdlib.OpenDB(*pgcfg, stdlib.OptionAfterConnect(registerTypes))
	db.SetMaxOpenConns(32)
	db.SetMaxIdleConns(32)
	db.SetConnMaxIdleTime(5 * time.Minute)
	if cfg == nil {
		cfg = &gorm.Config{Logger: logger.Discard}
	}
	gdb, err := gorm.Open(postgres.New(postgres.Config{Conn: db}), cfg)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("pgdriver: open: %w", err)
	}
	return &Driver{db: db, gdb: gdb, where: RedactURL(rawURL), tracer: tracer}, nil
}

func (d *Driver) Name() string         { return "postgres" }
func (d *Driver) Where() string        { return d.where }
func (d *Driver) Gorm() *gorm.DB       { return d.gdb }
func (d *Driver) GormWriter() *gorm.DB { return d.gdb }
func (d *Driver) Embedded() bool       { return false }

// Concurrency allows two flushers: each is one statement in flight. Fewer flushers make
// bigger groups (docs/benchmarks.md measured 1, 2, 4 and 8); two, so that a
// statement waiting on a lock (another writer creating the same key) does
// not hold up every new intent.
func (d *Driver) Concurrency() driver.Concurrency { return driver.Concurrency{Flushers: 2} }

func (d *Driver) Executor() driver.Executor {
	return &executor{q: d.db, noEndpoint: &d.noEndpoint, groups: &d.groups}
}

func (d *Driver) Begin(ctx context.Context) (driver.Tx, error) {
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	return &txExecutor{executor: executor{q: tx, inTx: true, noEndpoint: &d.noEndpoint, groups: &d.groups}, tx: tx}, nil
}

func (d *Driver) Migrations() fs.FS {
	sub, _ := fs.Sub(migrations.Postgres, "postgres")
	return sub
}

// Migrator takes an advisory lock for the session, so two replicas started
// with --migrate take turns instead of racing.
func (d *Driver) Migrator() (driver.Migrator, error) {
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return driver.Migrator{}, fmt.Errorf("pgdriver: migration lock: %w", err)
	}
	return driver.Migrator{GooseDialect: "postgres", DB: d.db, Lock: locker}, nil
}

func (d *Driver) Ping(ctx context.Context) error { return d.db.PingContext(ctx) }
func (d *Driver) Close() error                   { return d.db.Close() }

// querier is the pool or one transaction.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

type executor struct {
	q          querier
	inTx       bool
	noEndpoint *atomic.Bool
	// kept are the limit groups' rows LimitUse read in this transaction,
	// for ActionInsertMany to write with the charges.
	kept map[driver.GroupKey]driver.GroupState
	// groups is the driver's; judged are the groups LimitUseKept answered
	// from it, for ActionInsertMany to write only if they are still so;
	// written are the rows this transaction wrote, kept once it commits.
	groups  *keptGroups
	judged  map[driver.GroupKey]driver.GroupState
	written []keptRow
}

type txExecutor struct {
	executor
	tx *sql.Tx
}

func (t *txExecutor) Commit() error {
	if err := t.tx.Commit(); err != nil {
		return err
	}
	t.groups.put(t.written)
	return nil
}
func (t *txExecutor) Rollback() error { return t.tx.Rollback() }

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

// RedactURL drops the password from a database URL.
func RedactURL(raw string) string {
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
