package pgdriver

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/arbiter-ledger/arbiter/services/driver"
)

// claimDue claims in one statement: for each enabled endpoint, its oldest
// due deliveries up to its free slots (a LATERAL over the endpoint's index
// range, FOR UPDATE SKIP LOCKED), the oldest Limit of those leased and
// returned with their message and endpoint.
const claimDue = `WITH busy AS (SELECT * FROM unnest($4::uuid[], $5::int[]) AS b (endpoint_id, n)),
	picked AS (
		SELECT c.id FROM webhook_endpoints w
		LEFT JOIN busy b ON b.endpoint_id = w.id
		CROSS JOIN LATERAL (
			SELECT d.id, d.next_attempt_at FROM webhook_deliveries d
			WHERE d.endpoint_id = w.id AND d.state = 'pending' AND d.next_attempt_at <= $3
				AND (d.claimed_until IS NULL OR d.claimed_until < $3)
			ORDER BY d.next_attempt_at
			LIMIT least(greatest($6::int - coalesce(b.n, 0), 0), $7::int)
			FOR UPDATE OF d SKIP LOCKED) c
		WHERE w.enabled AND $6::int - coalesce(b.n, 0) > 0
		ORDER BY c.next_attempt_at LIMIT $7::int)
	UPDATE webhook_deliveries d SET claim = $1, claimed_until = $2
	FROM picked p, webhook_messages m, webhook_endpoints w
	WHERE d.id = p.id AND m.id = d.message_id AND w.id = d.endpoint_id
	RETURNING d.id, d.message_id, d.endpoint_id, m.event_type, m.payload, w.url, w.format, w.secret,
		w.previous_secret, w.previous_secret_until, d.attempts, w.failing_since`

func (e *executor) DeliveryClaim(ctx context.Context, p *driver.DeliveryClaimParams) ([]*driver.ClaimedDelivery, error) {
	eps, ns := make([]string, 0, len(p.Busy)), make([]int32, 0, len(p.Busy))
	for ep, n := range p.Busy {
		eps, ns = append(eps, ep), append(ns, int32(n))
	}
	rows, err := e.q.QueryContext(ctx, claimDue, p.Token, p.Until, p.Now, eps, ns, p.PerEndpoint, p.Limit)
	return driver.ScanClaimed(rows, err)
}

// DeliveryRecordAttempt is one statement, one round trip: data-modifying
// CTEs all run. The attempt is kept even if the lease passed and another
// dispatcher took the delivery over: the request was sent. A delivery
// deleted meanwhile (with its endpoint) keeps nothing.
func (e *executor) DeliveryRecordAttempt(ctx context.Context, p *driver.DeliveryRecordAttemptParams) error {
	q := `WITH attempt AS (INSERT INTO webhook_attempts (id, delivery_id, attempted_at, status_code, latency_ms,
		response_excerpt, error) SELECT $1, $2, $3, $4, $5, $6, $7
		WHERE EXISTS (SELECT 1 FROM webhook_deliveries WHERE id = $2)),
	delivery AS (UPDATE webhook_deliveries SET state = $8, attempts = $9, next_attempt_at = coalesce($10, next_attempt_at),
		last_status = $4, last_error = $7, claim = NULL, claimed_until = NULL, updated_at = $3 WHERE id = $2 AND claim = $11)
	`
	args := []any{p.AttemptID, p.DeliveryID, p.Now, p.StatusCode, p.LatencyMS, p.Excerpt, p.Error,
		p.State, p.Attempts, p.NextAttempt, p.Claim, p.EndpointID}
	switch p.Endpoint {
	case driver.EndpointSucceeded:
		q += `UPDATE webhook_endpoints SET failing_since = NULL WHERE id = $12 AND failing_since IS NOT NULL`
	case driver.EndpointDisable:
		q += `UPDATE webhook_endpoints SET enabled = false, disabled_reason = $13, updated_at = $3 WHERE id = $12`
		args = append(args, p.DisableWhy)
	default:
		q += `UPDATE webhook_endpoints SET failing_since = $3 WHERE id = $12 AND failing_since IS NULL`
	}
	_, err := e.q.ExecContext(ctx, q, args...)
	return err
}

func (e *executor) DeliveryQueueStats(ctx context.Context) (int64, *time.Time, error) {
	var n int64
	var oldest sql.NullTime
	err := e.q.QueryRowContext(ctx, `SELECT count(*), min(d.created_at) FROM webhook_deliveries d
		JOIN webhook_endpoints w ON w.id = d.endpoint_id WHERE d.state = 'pending' AND w.enabled`).Scan(&n, &oldest)
	return n, driver.UTCOrNil(oldest), err
}

func (e *executor) MessagePrune(ctx context.Context, p *driver.PruneParams) (int64, error) {
	res, err := e.q.ExecContext(ctx, fmt.Sprintf(`DELETE FROM webhook_messages WHERE id IN (SELECT m.id
		FROM webhook_messages m WHERE m.created_at < $1 AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d
		WHERE d.message_id = m.id AND d.state = 'pending') LIMIT %d)`, p.Limit), p.Before.UTC())
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}
