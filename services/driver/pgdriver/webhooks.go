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

// recordAttempts records a batch in one statement, one round trip and one
// commit: data-modifying CTEs all run. An attempt is kept even if the lease
// passed and another dispatcher took the delivery over: the request was
// sent. A delivery deleted meanwhile (with its endpoint) keeps nothing. Each
// endpoint is written at most once (a statement cannot change a row twice),
// with what its attempts do in turn (driver.EndpointNets), and only when
// that changes it. The statement commits without waiting for the WAL to
// reach the disk (synchronous_commit off for its transaction only): an
// attempt lost with the last moments before a database crash leaves its
// delivery leased, and it is sent again when the lease passes, which
// at-least-once allows.
const recordAttempts = `WITH r AS (
		SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::uuid[], $4::timestamptz[], $5::int[], $6::int[], $7::text[],
			$8::text[], $9::text[], $10::int[], $11::timestamptz[])
			AS r (attempt_id, delivery_id, claim, at, status_code, latency_ms, excerpt, error, state, attempts, next_at)
		WHERE set_config('synchronous_commit', 'off', true) IS NOT NULL),
	attempt AS (INSERT INTO webhook_attempts (id, delivery_id, attempted_at, status_code, latency_ms, response_excerpt, error)
		SELECT r.attempt_id, r.delivery_id, r.at, r.status_code, r.latency_ms, r.excerpt, r.error FROM r
		WHERE EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.id = r.delivery_id)),
	delivery AS (UPDATE webhook_deliveries d SET state = r.state, attempts = r.attempts,
		next_attempt_at = coalesce(r.next_at, d.next_attempt_at), last_status = r.status_code, last_error = r.error,
		claim = NULL, claimed_until = NULL, updated_at = r.at
		FROM r WHERE d.id = r.delivery_id AND d.claim = r.claim)
	UPDATE webhook_endpoints w SET
		failing_since = CASE WHEN e.reset THEN e.fail_at ELSE coalesce(w.failing_since, e.fail_at) END,
		enabled = w.enabled AND e.why = '',
		disabled_reason = CASE WHEN e.why = '' THEN w.disabled_reason ELSE e.why END,
		updated_at = CASE WHEN e.why = '' THEN w.updated_at ELSE e.why_at END
	FROM unnest($12::uuid[], $13::bool[], $14::timestamptz[], $15::text[], $16::timestamptz[])
		AS e (id, reset, fail_at, why, why_at)
	WHERE w.id = e.id AND (e.why <> ''
		OR (e.reset AND w.failing_since IS DISTINCT FROM e.fail_at)
		OR (NOT e.reset AND w.failing_since IS NULL AND e.fail_at IS NOT NULL))`

// DeliveryRecordAttempt records one attempt with the batch's statement.
func (e *executor) DeliveryRecordAttempt(ctx context.Context, p *driver.DeliveryRecordAttemptParams) error {
	return e.DeliveryRecordAttempts(ctx, []*driver.DeliveryRecordAttemptParams{p})
}

func (e *executor) DeliveryRecordAttempts(ctx context.Context, ps []*driver.DeliveryRecordAttemptParams) error {
	if len(ps) == 0 {
		return nil
	}
	n := len(ps)
	var (
		attemptIDs, deliveryIDs, claims = make([]string, n), make([]string, n), make([]string, n)
		ats                             = make([]time.Time, n)
		statuses                        = make([]*int32, n)
		latencies                       = make([]int32, n)
		excerpts, states                = make([]string, n), make([]string, n)
		errs                            = make([]*string, n)
		attempts                        = make([]int32, n)
		nexts                           = make([]*time.Time, n)
	)
	for i, p := range ps {
		attemptIDs[i], deliveryIDs[i], claims[i], ats[i] = p.AttemptID, p.DeliveryID, p.Claim, p.Now
		if p.StatusCode != nil {
			s := int32(*p.StatusCode)
			statuses[i] = &s
		}
		latencies[i], excerpts[i], errs[i], states[i] = int32(p.LatencyMS), p.Excerpt, p.Error, p.State
		attempts[i], nexts[i] = int32(p.Attempts), p.NextAttempt
	}
	nets := driver.EndpointNets(ps)
	var (
		eps, whys = make([]string, len(nets)), make([]string, len(nets))
		resets    = make([]bool, len(nets))
		failAts   = make([]*time.Time, len(nets))
		whyAts    = make([]time.Time, len(nets))
	)
	for i, x := range nets {
		eps[i], resets[i], failAts[i], whys[i], whyAts[i] = x.EndpointID, x.Reset, x.FailingSince, x.DisableWhy, x.DisableAt
	}
	_, err := e.q.ExecContext(ctx, recordAttempts, attemptIDs, deliveryIDs, claims, ats, statuses, latencies, excerpts,
		errs, states, attempts, nexts, eps, resets, failAts, whys, whyAts)
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
