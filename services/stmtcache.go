package services

import (
	"context"
	"database/sql"
	"sync"
)

// The SQLite driver compiles a statement's text on every call unless it is
// prepared. The ledger's writes all run on the one writer connection, so
// each of its statements is prepared there once and reused by every write
// transaction.

// stmtCache holds statements prepared on the SQLite writer pool. The pool
// has one connection, which a write transaction holds: a statement cannot be
// prepared from inside one. So a statement the cache does not know yet runs
// unprepared and is noted, and warm prepares what was noted before the next
// transaction begins.
type stmtCache struct {
	db     *sql.DB
	mu     sync.Mutex
	m      map[string]*sql.Stmt
	wanted map[string]bool
}

// maxPrepared bounds the statements kept: the ledger's fixed ones.
const maxPrepared = 64

// get returns the prepared statement for query, or nil after noting it.
func (c *stmtCache) get(query string) *sql.Stmt {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.m[query]; ok {
		return s
	}
	if len(c.m)+len(c.wanted) >= maxPrepared {
		return nil // statements built for a number of rows stay unprepared
	}
	if c.wanted == nil {
		c.wanted = map[string]bool{}
	}
	c.wanted[query] = true
	return nil
}

// warm prepares the statements noted since the last call. It must run
// outside any transaction on the pool.
func (c *stmtCache) warm(ctx context.Context) {
	c.mu.Lock()
	var queries []string
	for q := range c.wanted {
		queries = append(queries, q)
	}
	c.wanted = nil
	c.mu.Unlock()
	for _, q := range queries {
		s, err := c.db.PrepareContext(ctx, q)
		if err != nil {
			continue // it runs unprepared and is noted again
		}
		c.mu.Lock()
		if c.m == nil {
			c.m = map[string]*sql.Stmt{}
		}
		if c.m[q] == nil {
			c.m[q] = s
			s = nil
		}
		c.mu.Unlock()
		if s != nil {
			s.Close()
		}
	}
}

func (c *stmtCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.m {
		s.Close()
	}
	c.m = nil
}

// preparedTx runs a write transaction's statements through the cache.
type preparedTx struct {
	tx    *sql.Tx
	cache *stmtCache
}

func (p preparedTx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if s := p.cache.get(query); s != nil {
		return p.tx.StmtContext(ctx, s).ExecContext(ctx, args...)
	}
	return p.tx.ExecContext(ctx, query, args...)
}

func (p preparedTx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if s := p.cache.get(query); s != nil {
		return p.tx.StmtContext(ctx, s).QueryContext(ctx, args...)
	}
	return p.tx.QueryContext(ctx, query, args...)
}

func (p preparedTx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if s := p.cache.get(query); s != nil {
		return p.tx.StmtContext(ctx, s).QueryRowContext(ctx, args...)
	}
	return p.tx.QueryRowContext(ctx, query, args...)
}

// beginWrite begins a write transaction on the writer pool, first preparing
// the statements earlier transactions ran unprepared.
func (s *Store) beginWrite(ctx context.Context) (*sql.Tx, error) {
	if s.Dialect == SQLite {
		s.stmts.warm(ctx)
	}
	return s.wsq.BeginTx(ctx, nil)
}

// writeTx is how ledger code sees a write transaction: on SQLite its
// statements are prepared once on the writer connection.
func (s *Store) writeTx(tx *sql.Tx) dbtx {
	if s.Dialect == SQLite {
		return preparedTx{tx: tx, cache: &s.stmts}
	}
	return tx
}
