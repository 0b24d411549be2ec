package accounts

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
)

// Finding 2 of the security review, the memory side: every argon2id check
// takes 19 MiB and any number ran at once. At most hashSlots run; a check
// that finds none free within HashWait is told the server is busy.
func TestSecurityPasswordHashingIsCapped(t *testing.T) {
	t.Parallel()
	st := dbtest.Open(t, services.SQLite)
	a := New(st)
	a.HashWait = 200 * time.Millisecond
	ctx := context.Background()
	_, err := a.CreateUser(ctx, "ops@example.com", services.RoleOperator, "correct horse battery")
	require.NoError(t, err)

	var held []func()
	for range hashSlots {
		release, err := a.hashSlot(ctx)
		require.NoError(t, err)
		held = append(held, release)
	}
	_, err = a.SignIn(ctx, "ops@example.com", "correct horse battery", "192.0.2.1", "test")
	requireBusy(t, err)
	// Hashing a new password waits for the same slots.
	_, err = a.hash(ctx, "another password")
	requireBusy(t, err)
	for _, release := range held {
		release()
	}
	held = nil

	// Many at once: never more than hashSlots inside argon2id.
	var running, most atomic.Int32
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			release, err := a.hashSlot(ctx)
			if err != nil {
				return
			}
			n := running.Add(1)
			for {
				m := most.Load()
				if n <= m || most.CompareAndSwap(m, n) {
					break
				}
			}
			time.Sleep(20 * time.Millisecond)
			running.Add(-1)
			release()
		})
	}
	wg.Wait()
	require.LessOrEqual(t, most.Load(), int32(hashSlots))
	_, err = a.SignIn(ctx, "ops@example.com", "correct horse battery", "192.0.2.1", "test")
	require.NoError(t, err, "a free slot again")
}

func requireBusy(t *testing.T, err error) {
	t.Helper()
	e, ok := services.AsError(err)
	require.True(t, ok, "%v", err)
	require.Equal(t, services.CodeUnavailable, e.Code)
	require.Contains(t, e.Message, "busy")
}
