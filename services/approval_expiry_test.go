package services_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
	"github.com/arbiter-ledger/arbiter/services/record"
	"github.com/arbiter-ledger/arbiter/services/webhooks/webhookstest"
)

// Time is checked when it matters: once an approval's expires_at has
// passed, an approve is approval_expired and an intent is denied, whether
// or not the sweeper has run. The expiry is recorded at that moment, as the
// sweeper would have recorded it.

func TestApprovalExpiryWithoutTheSweeper(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		ctx := context.Background()
		for _, tc := range []struct {
			name  string
			setup func(t *testing.T, f *fixture)
			act   func(t *testing.T, f *fixture)
		}{
			{name: "intent while awaiting approval",
				act: func(t *testing.T, f *fixture) {
					res := submit(t, f.l, f.agent, intentApproval)
					require.Equal(t, record.OutcomeDenied, res.Outcome, "%+v", res.Error)
					require.Nil(t, res.Error)
					require.Equal(t, record.StatusDenied, res.Action.Status)
				}},
			{name: "proceed after approval",
				setup: func(t *testing.T, f *fixture) {
					_, err := approveAs(t, f, f.operator, "fine")
					require.NoError(t, err)
				},
				act: func(t *testing.T, f *fixture) {
					res := submit(t, f.l, f.agent, intentApproval)
					require.Equal(t, record.OutcomeDenied, res.Outcome, "%+v", res.Error)
					require.Equal(t, record.StatusDenied, res.Action.Status)
					require.Equal(t, 0, res.Action.Attempt, "no attempt started")
				}},
			{name: "approve",
				act: func(t *testing.T, f *fixture) {
					_, err := approveAs(t, f, f.operator, "too late")
					var e *services.Error
					require.True(t, errors.As(err, &e), "error %v", err)
					require.Equal(t, services.CodeApprovalExpired, e.Code, e.Message)
					a := f.action(t, "k")
					require.Equal(t, record.StatusDenied, a.Status)
					require.NotNil(t, a.Approval)
					require.Empty(t, a.Approval.Approvals, "the late approval is not counted")
					require.NotContains(t, services.AllowedDecisions(a), record.DecisionApprove)
				}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				e := newHookEnv(t, st)
				e.endpoint(t, webhookstest.EndpointOpts{URL: "http://127.0.0.1:9/", Events: []record.EventType{record.EventApprovalExpired}})
				f := e.fixture
				res := submit(t, f.l, f.agent, intentApproval)
				require.Equal(t, record.OutcomePendingApproval, res.Outcome)
				id := res.Action.ID
				if tc.setup != nil {
					tc.setup(t, f)
				}
				f.clock.Advance(24*time.Hour + time.Second) // past expires_at; the sweeper does not run
				tc.act(t, f)

				es := f.entries(t, id)
				last := es[len(es)-1]
				require.Equal(t, record.TypeApprovalExpired, last.Type, describeEntries(es))
				require.Equal(t, record.ActorSystem, last.Actor.Kind)
				require.Equal(t, 1, countEntries(t, st, id, record.TypeApprovalExpired))
				n, err := st.CountMessages(ctx, id, record.EventApprovalExpired)
				require.NoError(t, err)
				require.Equal(t, 1, n, "action.approval_expired once")

				// Later intents stay denied; the sweeper finds nothing to do.
				again := submit(t, f.l, f.agent, intentApproval)
				require.Equal(t, record.OutcomeDenied, again.Outcome)
				_, err = f.l.Sweep(ctx)
				require.NoError(t, err)
				require.Equal(t, 1, countEntries(t, st, id, record.TypeApprovalExpired))
				require.Zero(t, countEntries(t, st, id, record.TypeIntent)-1, "no attempt's intent was written")
			})
		}
	})
}
