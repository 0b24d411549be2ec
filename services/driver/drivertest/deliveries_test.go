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
