package client_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/client"
	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
)

func TestGuardFailsClosedWhenArbiterIsDown(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		c := e.agent("payments")
		ctx := context.Background()
		e.proxy.cut()
		var runs atomic.Int32
		out, err := c.Guard(ctx, refundSpec("down", 10), counted(&runs))
		assert.Nil(t, out)
		require.ErrorIs(t, err, client.ErrUnreachable)
		assert.True(t, client.IsUnavailable(err))
		assert.True(t, strings.HasPrefix(err.Error(), "arbiter unreachable: the action was not started"), err.Error())
		assert.Equal(t, int32(0), runs.Load(), "nothing runs without a recorded intent")

		e.proxy.restore("")
		_, err = c.ActionByKey(ctx, "refund:down")
		assert.True(t, client.IsCode(err, "not_found"), "%v", err)
	})
}

// The server restarts while the guarded function runs: heartbeats fail for
// a while, the function carries on, and its outcome lands for the same
// attempt once the server is back.
func TestGuardSurvivesAServerRestart(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		rec := newRecorder()
		c := e.agent("payments", client.WithHTTPClient(&http.Client{Transport: rec}))
		ctx := context.Background()
		spec := refundSpec("restart", 10)
		spec.Timeout = 3 * time.Second
		out, err := c.Guard(ctx, spec, func(ctx context.Context, a client.Attempt) (any, string, error) {
			time.Sleep(1200 * time.Millisecond)
			e.restartServer(time.Second)
			time.Sleep(1200 * time.Millisecond)
			return map[string]string{"id": "re_r"}, "re_r", ctx.Err()
		})
		require.NoError(t, err)
		assert.True(t, out.Ran)
		assert.Equal(t, 1, out.Attempt)
		assert.Equal(t, client.StatusSucceeded, out.Action.Status)
		assert.Equal(t, 1, out.Action.Attempt)

		failedBeats := 0
		for _, cl := range rec.entries(`"type":"heartbeat"`) {
			if cl.Err != nil {
				failedBeats++
			}
		}
		assert.Positive(t, failedBeats, "the restart happened while heartbeats were due")
		types, entries := timeline(t, c, "refund:restart")
		assert.Equal(t, "intent", types[0])
		assert.Equal(t, "succeeded", types[len(types)-1], "%v", types)
		assert.Equal(t, 1, count(types, "succeeded"))
		assert.Zero(t, count(types, "late_result")+count(types, "lease_lost")+count(types, "timed_out"), "%v", types)
		assert.Equal(t, 1, *entries[len(entries)-1].Attempt)
	})
}

// The network fails exactly when the outcome is reported: the report is
// retried with backoff and lands once.
func TestGuardRetriesAReportThatFailsOnTheNetwork(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		rec := newRecorder()
		c := e.agent("payments", client.WithHTTPClient(&http.Client{Transport: rec}))
		ctx := context.Background()
		out, err := c.Guard(ctx, refundSpec("cut", 10), func(ctx context.Context, a client.Attempt) (any, string, error) {
			// The effect is done; the connection to Arbiter drops now and
			// comes back a little later.
			e.proxy.cut()
			time.AfterFunc(600*time.Millisecond, func() { e.proxy.restore("") })
			return map[string]string{"id": "re_c"}, "re_c", nil
		})
		require.NoError(t, err)
		assert.Equal(t, client.StatusSucceeded, out.Action.Status)
		assert.Equal(t, "re_c", *out.Action.ExternalRef)

		reports := rec.entries(`"type":"succeeded"`, `"attempt":1`)
		require.GreaterOrEqual(t, len(reports), 2, "the first report failed and was sent again")
		assert.Error(t, reports[0].Err)
		last := reports[len(reports)-1]
		assert.NoError(t, last.Err)
		assert.Equal(t, http.StatusOK, last.Status)
		for _, r := range reports[:len(reports)-1] {
			assert.Error(t, r.Err, "only the last report got an answer")
		}
		types, _ := timeline(t, c, "refund:cut")
		assert.Equal(t, []string{"intent", "succeeded"}, types)
	})
}

// The report reaches Arbiter but its answer is lost: the retry is answered
// duplicate, which counts as done, and the ledger holds one outcome.
func TestGuardReportWhoseAnswerWasLostCountsOnce(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		rec := newRecorder()
		var dropped atomic.Bool
		rec.drop = func(method, path string, body []byte) bool {
			return strings.Contains(string(body), `"type":"succeeded"`) && dropped.CompareAndSwap(false, true)
		}
		c := e.agent("payments", client.WithHTTPClient(&http.Client{Transport: rec}))
		out, err := c.Guard(context.Background(), refundSpec("lost", 10), func(context.Context, client.Attempt) (any, string, error) {
			return "ok", "re_l", nil
		})
		require.NoError(t, err)
		assert.Equal(t, client.StatusSucceeded, out.Action.Status)
		reports := rec.entries(`"type":"succeeded"`)
		require.Len(t, reports, 2)
		assert.ErrorIs(t, reports[0].Err, errAnswerLost)
		assert.Equal(t, http.StatusOK, reports[1].Status)
		types, _ := timeline(t, c, "refund:lost")
		assert.Equal(t, []string{"intent", "succeeded"}, types)
	})
}

// A report that cannot land within the budget is given up with an error
// that says what was not recorded.
func TestGuardGivesUpAReportPastItsBudget(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		c := e.agent("payments", client.WithReportBudget(300*time.Millisecond))
		out, err := c.Guard(context.Background(), refundSpec("gone", 10), func(context.Context, client.Attempt) (any, string, error) {
			e.proxy.cut()
			return "ok", "re_g", nil
		})
		var re *client.ReportError
		require.ErrorAs(t, err, &re)
		assert.Equal(t, "succeeded", re.Type)
		assert.Equal(t, 1, re.Attempt)
		assert.True(t, client.IsUnavailable(err))
		assert.True(t, out.Ran, "the function ran; only the report is missing")
		e.proxy.restore("")
		types, _ := timeline(t, c, "refund:gone")
		assert.Equal(t, []string{"intent"}, types)
	})
}
