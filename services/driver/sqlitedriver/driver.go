// Package sqlitedriver is Arbiter's storage on an embedded SQLite file:
// every operation of driver.Executor in SQLite's own SQL, with ?
// placeholders. Writes go through a single connection, so that concurrent
// writers queue in the process instead of failing with "database is
// locked"; reads use a pool of their own beside it (WAL lets them run
// during a write). A change of the ledger is one transaction on the writer.
package sqlitedriver

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/glebarez/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/arbiter-ledger/arbiter/migrations"
	"github.com/arbiter-ledger/arbiter/services/driver"
)

// Driver is a SQLite database file.
type Driver struct {
	rdb, wdb *gorm.DB
	rsq, wsq *sql.DB
	where    string
}

var _ driver.Driver = (*Driver)(nil)

// Open opens (creating if needed) the database file at path.
func Open(path string, cfg *gorm.Config) (*Driver, error) {
	path = strings.TrimPrefix(path, "//")
	if path == "" {
		return nil, errors.New("sqlitedriver: empty path in database URL")
	}
	if dir := filepath.Dir(path); dir != "." {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return nil, fmt.Errorf("sqlitedriver: create %s: %w", dir, err)
		}
	}
	if cfg == nil {
		cfg = &gorm.Config{Logger: logger.Discard}
	}
	dsn := "file:" + path + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)" +
		"&_pragma=foreign_keys(1)&_pragma=synchronous(FULL)&_time_format=sqlite&_txlock=immediate"
	wdb, err := gorm.Open(sqlite.Open(dsn), cfg)
	if err != nil {
		return nil, fmt.Errorf("sqlitedriver: open %s: %w", path, err)
	}
	wsq, _ := wdb.DB()
	wsq.SetMaxOpenConns(1)
	rdb, err := gorm.Open(sqlite.Open(dsn+"&_pragma=query_only(1)"), cfg)
	if err != nil {
		wsq.Close()
		return nil, fmt.Errorf("sqlitedriver: open %s: %w", path, err)
	}
	rsq, _ := rdb.DB()
	rsq.SetMaxOpenConns(8)
	return &Driver{rdb: rdb, wdb: wdb, rsq: rsq, wsq: wsq, where: "sqlite:" + path}, nil
}

func (d *Driver) Name() string         { return "sqlite" }
func (d *Driver) Where() string        { return d.where }
func (d *Driver) Gorm() *gorm.DB       { return d.rdb }
func (d *Driver) GormWriter() *gorm.DB { return d.wdb }
func (d *Driver) Embedded() bool       { return true }

// Concurrency is one writer: one transaction at a time.
func (d *Driver) Concurrency() driver.Concurrency {
	return driver.Concurrency{SingleWriter: true, Flushers: 1}
}

func (d *Driver) Executor() driver.Executor { return &executor{r: d.rsq, w: d.wsq, d: d} }

func (d *Driver) Begin(ctx context.Context) (driver.Tx, error) {
	tx, err := d.wsq.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	return &txExecutor{executor: executor{r: tx, w: tx, tx: tx, d: d}}, nil
}

func (d *Driver) Migrations() fs.FS {
	sub, _ := fs.Sub(migrations.SQLite, "sqlite")
	return sub
}

// Migrator takes no lock of its own: migrations run on the single writer
// connection, which already makes the process's writers take turns.
func (d *Driver) Migrator() (driver.Migrator, error) {
	return driver.Migrator{GooseDialect: "sqlite3", DB: d.wsq}, nil
}

func (d *Driver) Ping(ctx context.Context) error { return d.wsq.PingContext(ctx) }

func (d *Driver) Close() error { return errors.Join(d.wsq.Close(), d.rsq.Close()) }

// querier is a pool or one transaction.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// executor reads through r and writes through w: the read pool and the
// writer connection, or one transaction for both.
type executor struct {
	r, w querier
	tx   *sql.Tx // set inside a transaction
	d    *Driver
}

type txExecutor struct{ executor }

func (t *txExecutor) Commit() error   { return t.tx.Commit() }
func (t *txExecutor) Rollback() error { return t.tx.Rollback() }

// inTx runs fn in the executor's transaction, or in one of its own on the
// writer connection. Any failure rolls its own transaction back.
func (e *executor) inTx(ctx context.Context, fn func(q querier) error) error {
	if e.tx != nil {
		return fn(e.tx)
	}
	tx, err := e.d.wsq.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}
