package services_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
	"github.com/arbiter-ledger/arbiter/services/record"
)

// slowApprover holds every first intent of one namespace while its
// question is being answered, until released: a condition that takes its
// whole time bound, made deterministic.
type slowApprover struct {
	ns       string
	entered  chan string // the key being evaluated
	release  chan struct{}
	released sync.Once
}

func (a *slowApprover) Require(ctx context.Context, q services.ApprovalQuery) (*record.ApprovalRequest, error) {
	if q.Namespace != a.ns {
		return nil, nil
	}
	a.entered <- q.Tool
	select {
	case <-a.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return &record.ApprovalRequest{Required: 1, ExpiresAt: q.Now.Add(time.Hour), Policies: []record.PolicyRef{}}, nil
}

type answered struct {
	res []services.EntryResult
	err error
}

func (a *slowApprover) let() { a.released.Do(func() { close(a.release) }) }

// TestPoliciesAreEvaluatedOutsideTheWriter: while one namespace's first
// intent is being evaluated, other namespaces' entries, single or batched,
// are written and answered; the evaluated intent is then held as its
// policies said. On SQLite, with a single writer, evaluating inside the
// shared transaction held every namespace's writes for as long as the
// slowest condition ran.
func TestPoliciesAreEvaluatedOutsideTheWriter(t *testing.T) {
	t.Parallel()
	for _, batch := range []bool{false, true} {
		name := "single"
		if batch {
			name = "batch"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dbtest.Each(t, func(t *testing.T, st *services.Store) {
				slow := principal(t, st, PrincipalOpts{})
				other := principal(t, st, PrincipalOpts{})
				ap := &slowApprover{ns: slow.Namespace, entered: make(chan string, 4), release: make(chan struct{})}
				defer ap.let()
				l := services.NewLedger(st, services.LedgerConfig{Approver: ap})

				// The goroutines report to channels, never to t: a failed
				// test may end before they do.
				held := make(chan answered, 1)
				go func() {
					raws := [][]byte{[]byte(intent(IntentOpts{Key: "slow-1", Tool: "slow.one"}))}
					if batch {
						raws = append(raws, []byte(intent(IntentOpts{Key: "slow-2", Tool: "slow.two"})))
					}
					res, err := l.Submit(context.Background(), slow, raws)
					held <- answered{res, err}
				}()
				select {
				case <-ap.entered:
				case <-time.After(10 * time.Second):
					t.Fatal("the slow namespace's intent was never evaluated")
				}

				// The other namespace writes while the evaluation runs.
				done := make(chan answered, 1)
				go func() {
					res, err := l.Submit(context.Background(), other, [][]byte{[]byte(intent(IntentOpts{Key: "a"}))})
					if err != nil {
						done <- answered{nil, err}
						return
					}
					res2, err := l.Submit(context.Background(), other, [][]byte{
						[]byte(intent(IntentOpts{Key: "b"})), []byte(intent(IntentOpts{Key: "c"}))})
					done <- answered{append(res, res2...), err}
				}()
				select {
				case a := <-done:
					require.NoError(t, a.err)
					require.Len(t, a.res, 3)
					for _, r := range a.res {
						require.Equal(t, record.OutcomeProceed, r.Outcome, r.Key)
					}
				case <-time.After(10 * time.Second):
					t.Fatal("another namespace's writes waited for a policy evaluation")
				}
				select {
				case a := <-held:
					t.Fatalf("the slow intent was answered before its evaluation ended: %+v %v", a.res, a.err)
				default:
				}

				ap.let()
				if batch {
					<-ap.entered
				}
				var a answered
				select {
				case a = <-held:
				case <-time.After(10 * time.Second):
					t.Fatal("the slow intent was never answered")
				}
				require.NoError(t, a.err)
				for _, r := range a.res {
					require.Equal(t, record.OutcomePendingApproval, r.Outcome, r.Key)
					require.Equal(t, time.Hour, r.Action.Approval.ExpiresAt.Sub(r.Action.CreatedAt),
						"the approval's times count from the intent's record")
				}
			})
		})
	}
}
