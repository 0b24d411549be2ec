package dbtest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/arbiter-ledger/arbiter/migrations"
	"github.com/arbiter-ledger/arbiter/services"
)

// Each dialect is migrated once into a template, keyed by a hash of its
// migrations, and every test gets a copy: a PostgreSQL database made with
// CREATE DATABASE … TEMPLATE, a SQLite file copied into the test's directory.
// A copy is the migrated schema exactly and belongs to one test. On
// PostgreSQL creating and dropping a database costs more than migrating it,
// so a copy a test is done with is emptied and handed to the next (reuse.go).
//
// The PostgreSQL template is shared by every test binary on the server: the
// first to need it builds it under a fresh name while holding an advisory
// lock and renames it into place, so a template that exists is complete.
//
// Each test binary holds an advisory lock on an owner number of its own for
// as long as it runs, and names its databases after it. An empty database
// (PostgresURL) is dropped when its test ends; the migrated copies are kept
// for the next test until the binary exits. Whatever a binary leaves (its
// pooled copies, or anything when it dies) is dropped by the next binary to
// start, which finds the owner's lock free.

// lockClass is the first key of the owner and template-building locks ("arbi").
const lockClass = 0x61726269

// templateLock is the second key of the lock held while a template is built.
const templateLock = 0

// templateClass is the first key of the locks binaries hold, shared, on the
// template they use; the second is the template's hash. A template of other
// migrations that no binary holds is dropped by the sweep.
const templateClass = 0x61726274

var templateName = regexp.MustCompile(`^arbiter_template_([0-9a-f]{16})$`)

func templateKey(hash string) int32 {
	v, _ := strconv.ParseUint(hash[:8], 16, 32)
	return int32(uint32(v))
}

var poolName = regexp.MustCompile(`^arbiter_pool_(\d+)_\d+$`)

// pg is this binary's view of the PostgreSQL server: one admin connection
// pool, the session holding the owner lock, the template's name, and the
// migrated copies that finished tests handed back (reuse.go).
type pg struct {
	admin    *sql.DB
	session  *sql.Conn // holds the owner lock and a shared lock on the template
	owner    int32
	template string

	mu     sync.Mutex
	free   []*copyDB
	schema sync.Once
	shape  templateShape
}

var (
	pgOnce = sync.OnceValues(setupPostgres)
	dbSeq  atomic.Int64
)

func setupPostgres() (*pg, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin, err := sql.Open("pgx", AdminURL())
	if err != nil {
		return nil, err
	}
	admin.SetMaxIdleConns(8)
	p := &pg{admin: admin}
	if err := p.claimOwner(ctx); err != nil {
		return nil, err
	}
	if err := p.ensureTemplate(ctx); err != nil {
		return nil, err
	}
	p.sweep(ctx)
	return p, nil
}

// claimOwner picks an owner number no live binary holds and keeps its lock on
// a session that stays open until the process exits.
func (p *pg) claimOwner(ctx context.Context) error {
	conn, err := p.admin.Conn(ctx)
	if err != nil {
		return err
	}
	for range 10 {
		var b [4]byte
		if _, err := rand.Read(b[:]); err != nil {
			return err
		}
		owner := int32(binary.BigEndian.Uint32(b[:])&0x7fffffff) | 1
		var ok bool
		if err := conn.QueryRowContext(ctx, "SELECT pg_try_advisory_lock($1, $2)", lockClass, owner).Scan(&ok); err != nil {
			conn.Close()
			return err
		}
		if ok {
			p.owner, p.session = owner, conn
			return nil // conn is never returned: the lock lives as long as the process
		}
	}
	conn.Close()
	return errors.New("no free owner number")
}

// ensureTemplate builds the migrated template unless another binary has.
func (p *pg) ensureTemplate(ctx context.Context) error {
	hash := migrationsHash(migrations.Postgres)
	p.template = "arbiter_template_" + hash
	// Held before the template is looked for, so no sweep drops it meanwhile.
	if _, err := p.session.ExecContext(ctx, "SELECT pg_advisory_lock_shared($1, $2)", templateClass, templateKey(hash)); err != nil {
		return err
	}
	conn, err := p.admin.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "SELECT pg_advisory_lock($1, $2)", lockClass, templateLock); err != nil {
		return err
	}
	defer conn.ExecContext(context.Background(), "SELECT pg_advisory_unlock($1, $2)", lockClass, templateLock)
	var n int
	if err := conn.QueryRowContext(ctx, "SELECT count(*) FROM pg_database WHERE datname = $1", p.template).Scan(&n); err != nil {
		return err
	}
	if n == 1 {
		return nil
	}
	// A build left by a binary that died holding the lock is dropped.
	building := p.template + "_build"
	if _, err := conn.ExecContext(ctx, "DROP DATABASE IF EXISTS "+building+" WITH (FORCE)"); err != nil {
		return err
	}
	if _, err := conn.ExecContext(ctx, "CREATE DATABASE "+building); err != nil {
		return err
	}
	st, err := services.Open(ctx, databaseURL(building))
	if err != nil {
		return err
	}
	_, err = st.Migrate(ctx)
	st.Close()
	if err != nil {
		return err
	}
	// No connections are allowed to the template: one would make every
	// CREATE DATABASE … TEMPLATE fail while it lasts.
	for _, q := range []string{
		"ALTER DATABASE " + building + " RENAME TO " + p.template,
		"ALTER DATABASE " + p.template + " WITH IS_TEMPLATE true ALLOW_CONNECTIONS false",
	} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	return nil
}

// sweep drops the databases of binaries that are no longer running, and the
// templates of other migrations that no running binary uses.
func (p *pg) sweep(ctx context.Context) {
	rows, err := p.admin.QueryContext(ctx, "SELECT datname FROM pg_database WHERE datname LIKE 'arbiter_pool_%' OR datname LIKE 'arbiter_template_%'")
	if err != nil {
		return
	}
	var names []string
	for rows.Next() {
		var name string
		if rows.Scan(&name) == nil {
			names = append(names, name)
		}
	}
	rows.Close()
	conn, err := p.admin.Conn(ctx)
	if err != nil {
		return
	}
	defer conn.Close()
	for _, name := range names {
		if m := templateName.FindStringSubmatch(name); m != nil && name != p.template {
			key := templateKey(m[1])
			var free bool
			if conn.QueryRowContext(ctx, "SELECT pg_try_advisory_lock($1, $2)", templateClass, key).Scan(&free) != nil || !free {
				continue
			}
			conn.ExecContext(ctx, "ALTER DATABASE "+name+" WITH IS_TEMPLATE false")
			conn.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name)
			conn.ExecContext(ctx, "SELECT pg_advisory_unlock($1, $2)", templateClass, key)
			continue
		}
		m := poolName.FindStringSubmatch(name)
		if m == nil {
			continue
		}
		owner, err := strconv.ParseInt(m[1], 10, 32)
		if err != nil || int32(owner) == p.owner {
			continue
		}
		var free bool
		if conn.QueryRowContext(ctx, "SELECT pg_try_advisory_lock($1, $2)", lockClass, owner).Scan(&free) != nil || !free {
			continue
		}
		conn.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
		conn.ExecContext(ctx, "SELECT pg_advisory_unlock($1, $2)", lockClass, owner)
	}
}

// create makes a database for t, a copy of the template when migrated is
// set and an empty one otherwise, and drops it when t ends.
func (p *pg) create(t testing.TB, migrated bool) string {
	t.Helper()
	name := fmt.Sprintf("arbiter_pool_%d_%d", p.owner, dbSeq.Add(1))
	q := "CREATE DATABASE " + name
	if migrated {
		q += " TEMPLATE " + p.template
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := p.admin.ExecContext(ctx, q); err != nil {
		t.Fatalf("dbtest: create database on %s (set ARBITER_TEST_DATABASE_URL, or run `make test`): %v", AdminURL(), err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := p.admin.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Logf("dbtest: drop %s: %v", name, err)
		}
	})
	return databaseURL(name)
}

// databaseURL is AdminURL with its database replaced by name.
func databaseURL(name string) string {
	u, err := url.Parse(AdminURL())
	if err != nil {
		panic(fmt.Sprintf("dbtest: parse ARBITER_TEST_DATABASE_URL: %v", err))
	}
	u.Path = "/" + name
	return u.String()
}

// migrationsHash names a dialect's migrations by their content.
func migrationsHash(fsys fs.FS) string {
	h := sha256.New()
	fs.WalkDir(fsys, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(fsys, path)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s %d\n", path, len(b))
		h.Write(b)
		return nil
	})
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// sqliteTemplate is a migrated SQLite database's bytes, built once per
// binary into a file shared by every binary with the same migrations.
var sqliteTemplate = sync.OnceValues(func() ([]byte, error) {
	dir := filepath.Join(os.TempDir(), "arbiter-dbtest")
	path := filepath.Join(dir, "sqlite_"+migrationsHash(migrations.SQLite)+".db")
	if b, err := os.ReadFile(path); err == nil {
		return b, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	build, err := os.MkdirTemp(dir, "build")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(build)
	file := filepath.Join(build, "arbiter.db")
	ctx := context.Background()
	st, err := services.Open(ctx, "sqlite:"+file)
	if err != nil {
		return nil, err
	}
	_, err = st.Migrate(ctx)
	// Closing checkpoints the write-ahead log into the file.
	if cerr := st.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(file + "-wal"); err == nil {
		return nil, errors.New("the write-ahead log outlived the close")
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	// Renamed into place whole, so a reader never sees half a file.
	if err := os.Rename(file, path); err != nil {
		return nil, err
	}
	return b, nil
})
