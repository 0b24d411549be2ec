package services_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
	"github.com/arbiter-ledger/arbiter/services/record"
)

// race runs fn in n goroutines released at the same moment and waits for all
// of them, failing the test if they do not finish within limit (a deadlock).
func race(t *testing.T, n int, limit time.Duration, fn func(i int)) {
	t.Helper()
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			fn(i)
		})
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	close(start)
	select {
	case <-done:
	case <-time.After(limit):
		t.Fatalf("%d goroutines did not finish within %s: deadlock?", n, limit)
	}
}

// TestConcurrentFirstIntent: many workers sending the same new intent at once
// get exactly one proceed; the rest see the action in progress.
func TestConcurrentFirstIntent(t *testing.T) {
	t.Parallel()
	const workers = 100
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		f := newFixture(t, st, FixtureOpts{})
		results := make([][]services.EntryResult, workers)
		errs := make([]error, workers)
		race(t, workers, 30*time.Second, func(i int) {
			results[i], errs[i] = f.l.Submit(context.Background(), f.agent, [][]byte{[]byte(intentK)})
		})

		outcomes := map[record.Outcome]int{}
		var id string
		for i := range workers {
			require.NoError(t, errs[i])
			require.Len(t, results[i], 1)
			r := results[i][0]
			require.Nil(t, r.Error)
			outcomes[r.Outcome]++
			require.Equal(t, 1, *r.Attempt)
			if id == "" {
				id = r.Action.ID
			}
			require.Equal(t, id, r.Action.ID, "one action")
		}
		require.Equal(t, map[record.Outcome]int{"proceed": 1, "in_progress": workers - 1}, outcomes)
		a := f.action(t, "k")
		require.Equal(t, 1, a.Version)
		require.Equal(t, record.StatusInProgress, a.Status)
		require.Equal(t, 1, countEntries(t, st, a.ID, ""))
		require.Equal(t, 1, countEntries(t, st, "", "intent"))
	})
}

// TestConcurrentDecisions: operators deciding on one timed_out action at the
// same moment never both win.
func TestConcurrentDecisions(t *testing.T) {
	t.Parallel()
	const (
		operators = 20
		rounds    = 3
	)
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		c := newClock()
		for round := range rounds {
			t.Run(fmt.Sprint("round ", round), func(t *testing.T) {
				c.Advance(24 * time.Hour)
				f := newFixture(t, st, FixtureOpts{Clock: c})
				for _, o := range toTimedOut {
					o(t, f)
				}
				a := f.action(t, "k")
				errs := make([]error, operators)
				race(t, operators, 30*time.Second, func(i int) {
					// Neither decision is allowed after the other, so a loser
					// that reads late is refused too.
					d := services.DecisionInput{Decision: "confirm", Reason: fmt.Sprint("operator ", i)}
					if i%4 >= 2 {
						d.Decision = "abandon"
					}
					if i%2 == 0 {
						v := a.Version
						d.ExpectedVersion = &v
					}
					_, _, errs[i] = f.l.Decide(context.Background(), f.operator, a.ID, d)
				})

				wins := 0
				for i, err := range errs {
					if err == nil {
						wins++
						continue
					}
					e, ok := services.AsError(err)
					require.True(t, ok, "operator %d: %v", i, err)
					if i%2 == 0 {
						require.Equal(t, services.CodeVersionConflict, e.Code, "operator %d named the version: %s", i, e.Message)
					} else {
						require.Contains(t, []string{services.CodeVersionConflict, services.CodeInvalidTransition}, e.Code, e.Message)
					}
				}
				require.Equal(t, 1, wins)
				after := f.action(t, "k")
				require.Equal(t, a.Version+1, after.Version)
				require.Contains(t, []record.Status{"confirmed", "abandoned"}, after.Status)
				require.Equal(t, 1, countEntries(t, st, a.ID, "decision"))
			})
		}
	})
}

// TestConcurrentBatchesOverManyKeys: batches touching many keys in different
// orders from several goroutines never deadlock, and every key ends with one
// action holding every entry.
func TestConcurrentBatchesOverManyKeys(t *testing.T) {
	t.Parallel()
	const (
		workers = 8
		keys    = 50
	)
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		f := newFixture(t, st, FixtureOpts{})
		batches := make([][][]byte, workers)
		for w := range workers {
			var b [][]byte
			for _, k := range rand.Perm(keys) {
				b = append(b, []byte(intent(IntentOpts{Key: fmt.Sprint("key-", k), Timeout: 3600})))
			}
			for _, k := range rand.Perm(keys) {
				b = append(b, []byte(fmt.Sprintf(`{"key":"key-%d","type":"heartbeat","attempt":1,"timeout":3600}`, k)))
				b = append(b, []byte(fmt.Sprintf(`{"key":"key-%d","type":"note","message":"worker %d"}`, k, w)))
			}
			batches[w] = b
		}
		results := make([][]services.EntryResult, workers)
		errs := make([]error, workers)
		ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
		defer cancel()
		race(t, workers, time.Minute, func(w int) {
			results[w], errs[w] = f.l.Submit(ctx, f.agent, batches[w])
		})

		proceeds := map[string]int{}
		for w := range workers {
			require.NoError(t, errs[w])
			require.Len(t, results[w], len(batches[w]))
			for _, r := range results[w] {
				require.Nil(t, r.Error, "%s %s", r.Type, r.Key)
				switch r.Type {
				case "intent":
					require.Contains(t, []record.Outcome{"proceed", "in_progress"}, r.Outcome)
					if r.Outcome == "proceed" {
						proceeds[r.Key]++
					}
				default:
					require.Equal(t, record.OutcomeRecorded, r.Outcome, "%s %s", r.Type, r.Key)
				}
			}
		}
		require.Len(t, proceeds, keys)
		for k, n := range proceeds {
			require.Equal(t, 1, n, "proceeds for %s", k)
		}
		for k := range keys {
			a := f.action(t, fmt.Sprint("key-", k))
			require.Equal(t, 1+workers, a.Version, "intent and one heartbeat per worker")
			require.Equal(t, 1+2*workers, countEntries(t, st, a.ID, ""))
		}
	})
}

// TestLateResultRacingTheSweeper: a late succeeded and the sweeper arriving
// together always end succeeded, with the late result recorded once.
func TestLateResultRacingTheSweeper(t *testing.T) {
	t.Parallel()
	const actions = 20
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		f := newFixture(t, st, FixtureOpts{})
		seedLeases(t, f, "late", actions, 60)
		f.clock.Advance(time.Minute)
		errs := make([]error, actions+1)
		results := make([][]services.EntryResult, actions)
		race(t, actions+1, 30*time.Second, func(i int) {
			if i == actions {
				_, errs[i] = f.l.Sweep(context.Background())
				return
			}
			raw := fmt.Sprintf(`{"key":"late-%d","type":"succeeded","attempt":1}`, i)
			results[i], errs[i] = f.l.Submit(context.Background(), f.agent, [][]byte{[]byte(raw)})
		})
		for i := range actions {
			require.NoError(t, errs[i])
			require.Equal(t, record.OutcomeRecorded, results[i][0].Outcome)
			a := f.action(t, fmt.Sprint("late-", i))
			require.Equal(t, record.StatusSucceeded, a.Status)
			require.Equal(t, 1, countEntries(t, st, a.ID, "late_result"))
			require.LessOrEqual(t, countEntries(t, st, a.ID, "timed_out"), 1)
			require.Zero(t, countEntries(t, st, a.ID, "succeeded"))
		}
		require.NoError(t, errs[actions])
	})
}
