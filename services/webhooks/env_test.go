package webhooks_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/accounts"
)

// The webhook tests need a ledger that alerts: actions time out on a fake
// clock and the outbox holds what they alerted. This is that much of the
// ledger suite's fixture (services/ledger_test.go).

// clock is a fake clock the tests move by hand instead of sleeping.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock on, at the database's microsecond precision.
func (c *clock) Advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d).UTC().Truncate(time.Microsecond)
	return c.now
}

var namespaceSeq atomic.Int64

// fixture is one namespace with an agent and an operator key, and a ledger
// on a fake clock.
type fixture struct {
	st              *services.Store
	l               *services.Ledger
	clock           *clock
	ns              string
	agent, operator services.Principal
}

func newFixture(t *testing.T, st *services.Store) *fixture {
	t.Helper()
	c := &clock{now: time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)}
	f := &fixture{st: st, clock: c, ns: fmt.Sprintf("hooks-%d", namespaceSeq.Add(1)),
		l: services.NewLedger(st, services.LedgerConfig{Now: c.Now})}
	f.agent = f.key(t, "refund-bot", services.RoleAgent, "")
	f.operator = f.key(t, "ops-alice", services.RoleOperator, "alice@example.com")
	return f
}

// key creates an API key in the fixture's namespace, owned by the user of
// email unless it is empty, and returns the principal it authenticates as.
func (f *fixture) key(t *testing.T, name string, role services.Role, email string) services.Principal {
	t.Helper()
	ctx := context.Background()
	if email != "" {
		a := accounts.New(f.st)
		if _, err := a.UserByEmail(ctx, email); err != nil {
			_, err := a.CreateUser(ctx, email, services.RoleOperator, "correct horse battery staple")
			require.NoError(t, err)
		}
	}
	keys := accounts.NewKeys(f.st)
	_, secret, err := keys.CreateKey(ctx, accounts.CreateKeyRequest{Namespace: f.ns, Name: name, Role: role, Owner: email})
	require.NoError(t, err)
	p, err := keys.Authenticate(ctx, secret)
	require.NoError(t, err)
	return p
}

// submit sends one entry and returns its result; the database must not fail.
func submit(t *testing.T, l *services.Ledger, p services.Principal, raw string) services.EntryResult {
	t.Helper()
	res, err := l.Submit(context.Background(), p, [][]byte{[]byte(raw)})
	require.NoError(t, err)
	require.Len(t, res, 1)
	return res[0]
}

// intent is a keyed refund's intent on key with a lease of timeout seconds.
func intent(key string, timeout int) string {
	return fmt.Sprintf(`{"key":%q,"type":"intent","tool":"payments.refund","effect":"keyed","params":{"order":"8812","amount":10},"timeout":%d}`,
		key, timeout)
}
