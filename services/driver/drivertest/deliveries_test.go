package drivertest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
	"github.com/arbiter-ledger/arbiter/services/driver"
	"github.com/arbiter-ledger/arbiter/services/record"
)

// TestAttemptOfADeletedEndpoint: an endpoint deleted while one of its
// deliveries is being sent takes its deliveries with it; recording the
// attempt afterwards keeps nothing and is no error.
func TestAttemptOfADeletedEndpoint(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		ctx, d := setup(t, st)
		ex := d.Executor()
		ep := endpoint(t, d, record.EventTimedOut)
		a := newAction(opts{key: "k"})
		insert(t, ctx, ex, a)
		_, err := ex.ActionUpdateMany(ctx, []*driver.Change{update(a.Next, record.StatusTimedOut, t0.Add(time.Minute), record.EventTimedOut)})
		require.NoError(t, err)
		token := driver.NewID()
		claimed, err := ex.DeliveryClaim(ctx, &driver.DeliveryClaimParams{Token: token, Now: time.Now(),
			Until: time.Now().Add(time.Minute), Limit: 10, PerEndpoint: 10, Busy: map[string]int{}})
		require.NoError(t, err)
		require.Len(t, claimed, 1)

		require.NoError(t, d.GormWriter().Exec(`DELETE FROM webhook_endpoints WHERE id = ?`, ep).Error)
		status := 200
		require.NoError(t, ex.DeliveryRecordAttempt(ctx, &driver.DeliveryRecordAttemptParams{AttemptID: driver.NewID(),
			DeliveryID: claimed[0].ID, Claim: token, Now: time.Now(), StatusCode: &status, LatencyMS: 3, State: "succeeded",
			Attempts: 1, EndpointID: ep, Endpoint: driver.EndpointSucceeded}))
		var attempts int
		require.NoError(t, d.Gorm().Raw(`SELECT count(*) FROM webhook_attempts`).Scan(&attempts).Error)
		require.Zero(t, attempts)
	})
}

// TestAttemptsRecordedInOneBatch: a batch of attempts over two endpoints
// keeps every attempt, moves every delivery on, and leaves each endpoint's
// failure streak and state as recording them one by one would.
func TestAttemptsRecordedInOneBatch(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		ctx, d := setup(t, st)
		ex := d.Executor()
		steady := endpoint(t, d, record.EventTimedOut)
		gone := endpoint(t, d, record.EventTimedOut)
		for i := range 3 {
			a := newAction(opts{key: "k" + string(rune('a'+i))})
			insert(t, ctx, ex, a)
			_, err := ex.ActionUpdateMany(ctx, []*driver.Change{update(a.Next, record.StatusTimedOut, t0.Add(time.Minute), record.EventTimedOut)})
			require.NoError(t, err)
		}
		token := driver.NewID()
		now := time.Now().UTC().Truncate(time.Millisecond)
		claimed, err := ex.DeliveryClaim(ctx, &driver.DeliveryClaimParams{Token: token, Now: now,
			Until: now.Add(time.Minute), Limit: 10, PerEndpoint: 10, Busy: map[string]int{}})
		require.NoError(t, err)
		require.Len(t, claimed, 6)
		var ps []*driver.DeliveryRecordAttemptParams
		step := 0
		for _, c := range claimed {
			step++
			at := now.Add(time.Duration(step) * time.Second)
			p := &driver.DeliveryRecordAttemptParams{AttemptID: driver.NewID(), DeliveryID: c.ID, Claim: token, Now: at,
				LatencyMS: 1, Attempts: 1, EndpointID: c.EndpointID}
			status := 200
			switch {
			case c.EndpointID == gone && len(ps)%2 == 0:
				status, p.State, p.Endpoint, p.DisableWhy = 410, "failed", driver.EndpointDisable, "the receiver answered 410 Gone"
			case c.EndpointID == steady && step <= 3:
				// the steady endpoint fails first, then succeeds, then fails
				status, p.State, p.Endpoint, p.NextAttempt = 500, "pending", driver.EndpointFailing, &at
			default:
				p.State, p.Endpoint = "succeeded", driver.EndpointSucceeded
			}
			p.StatusCode = &status
			ps = append(ps, p)
		}
		require.NoError(t, ex.DeliveryRecordAttempts(ctx, ps))

		var attempts, claimedLeft int
		require.NoError(t, d.Gorm().Raw(`SELECT count(*) FROM webhook_attempts`).Scan(&attempts).Error)
		require.Equal(t, 6, attempts)
		require.NoError(t, d.Gorm().Raw(`SELECT count(*) FROM webhook_deliveries WHERE claim IS NOT NULL`).Scan(&claimedLeft).Error)
		require.Zero(t, claimedLeft)

		// Recording the same attempts one by one on the same rows must give
		// the same endpoints: compute what that gives.
		want := map[string]*driver.EndpointNet{}
		for _, n := range driver.EndpointNets(ps) {
			want[n.EndpointID] = n
		}
		for _, ep := range []string{steady, gone} {
			var row struct {
				Enabled        bool
				DisabledReason *string
				FailingSince   *time.Time
			}
			require.NoError(t, d.Gorm().Raw(`SELECT enabled, disabled_reason, failing_since FROM webhook_endpoints WHERE id = ?`, ep).Scan(&row).Error)
			n := want[ep]
			require.Equal(t, n.DisableWhy == "", row.Enabled, ep)
			if n.FailingSince == nil {
				require.Nil(t, row.FailingSince, ep)
			} else {
				require.NotNil(t, row.FailingSince, ep)
				require.True(t, n.FailingSince.Equal(*row.FailingSince), "%s: %s, want %s", ep, row.FailingSince, n.FailingSince)
			}
		}
	})
}
