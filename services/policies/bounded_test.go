package policies_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
	"github.com/arbiter-ledger/arbiter/services/policies"
	"github.com/arbiter-ledger/arbiter/services/record"
)

// bigParams is an intent's params with a 60 KB string, about the largest
// an entry allows.
var bigParams = fmt.Sprintf(`{"note":%q}`, strings.Repeat("a", 60_000))

// TestARegexOverALargeParamHoldsTheIntent: a condition whose regular
// expression would run for seconds over a large param reaches its bound at
// once and holds the intent, with the bound in the error the approver
// reads (fail closed, as a run-time error does).
func TestARegexOverALargeParamHoldsTheIntent(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		e.create(t, policies.Input{Name: ptr("careless regex"), Tools: &[]string{"notes.*"},
			Condition: ptr(`params.note.matches('.{0,1000}.{0,1000}x')`)})
		start := time.Now()
		res := e.intent(t, "storm", "notes.write", bigParams)
		require.Less(t, time.Since(start), time.Second*policies.Slowdown)
		require.Equal(t, record.OutcomePendingApproval, res.Outcome)
		require.Contains(t, res.Action.Approval.Error, "careless regex")
		require.Contains(t, res.Action.Approval.Error, "regular expression")
		require.Equal(t, record.OutcomeProceed, e.intent(t, "calm", "notes.write", `{"note":"short"}`).Outcome,
			"the same condition over a short param runs")
	})
}

// TestPolicyTestIsBounded: the dry run stops when its caller leaves, and
// answers what it examined when its time budget runs out.
func TestPolicyTestIsBounded(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		const n = 40
		for i := range n {
			e.intent(t, fmt.Sprint("n", i), "notes.write", bigParams)
		}
		// Each evaluation runs regular expressions up to its cost limit.
		heavy := `params.note.matches('[ab]{1,12}c') || params.note.matches('[ab]{1,12}d') || params.note.matches('[ab]{1,12}e')`
		in := policies.TestInput{Namespace: e.ns, Tools: []string{"notes.*"}, Condition: heavy, Limit: ptr(n)}

		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := e.pol.Test(ctx, admin, in)
		require.ErrorIs(t, err, context.DeadlineExceeded, "the caller left")
		require.Less(t, time.Since(start), time.Second*policies.Slowdown)

		policies.SetTestBudget(e.pol, 100*time.Millisecond)
		start = time.Now()
		res, err := e.pol.Test(context.Background(), admin, in)
		require.NoError(t, err)
		require.Less(t, time.Since(start), time.Second*policies.Slowdown)
		require.True(t, res.Partial)
		require.Less(t, res.Examined, n)
		require.Equal(t, res.Examined, res.Matched, "every one it examined failed at the cost limit: fail closed")
		require.Equal(t, res.Examined, res.Errors)

		policies.SetTestBudget(e.pol, policies.DefaultTestBudget)
		res, err = e.pol.Test(context.Background(), admin, policies.TestInput{Namespace: e.ns, Tools: []string{"notes.*"},
			Condition: `params.note.startsWith('a')`})
		require.NoError(t, err)
		require.False(t, res.Partial)
		require.Equal(t, n, res.Examined)
		require.Equal(t, n, res.Matched)
	})
}
