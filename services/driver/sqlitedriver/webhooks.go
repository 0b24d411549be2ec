package sqlitedriver

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/arbiter-ledger/arbiter/services/driver"
)

const dueWhere = `d.state = 'pending' AND d.next_attempt_at <= ? AND (d.claimed_until IS NULL OR d.claimed_until < ?)`

// DeliveryClaim claims with the single writer: the endpoints with due
// deliveries, each one's oldest up to its free slots, then the oldest Limit
// of those leased in one UPDATE that checks again that they are free. One
// query per endpoint with due work is cheap in-process.
func (e *executor) DeliveryClaim(ctx context.Context, p *driver.DeliveryClaimParams) ([]*driver.ClaimedDelivery, error) {
	rows, err := e.w.QueryContext(ctx, `SELECT w.id FROM webhook_endpoints w WHERE w.enabled
		AND EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.endpoint_id = w.id AND `+dueWhere+`)`, p.Now, p.Now)
	if err != nil {
		return nil, err
	}
	var eps []string
	for rows.Next() {
		var ep string
		if err := rows.Scan(&ep); err != nil {
			rows.Close()
			return nil, err
		}
		eps = append(eps, ep)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	type candidate struct {
		id   string
		next time.Time
	}
	var cands []candidate
	for _, ep := range eps {
		slots := min(p.PerEndpoint-p.Busy[ep], p.Limit)
		if slots <= 0 {
			continue
		}
		rows, err := e.w.QueryContext(ctx, `SELECT d.id, d.next_attempt_at FROM webhook_deliveries d
			WHERE d.endpoint_id = ? AND `+dueWhere+` ORDER BY d.next_attempt_at LIMIT ?`, ep, p.Now, p.Now, slots)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var c candidate
			if err := rows.Scan(&c.id, &c.next); err != nil {
				rows.Close()
				return nil, err
			}
			cands = append(cands, c)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	if len(cands) == 0 {
		return nil, nil
	}
	slices.SortStableFunc(cands, func(a, b candidate) int { return a.next.Compare(b.next) })
	cands = cands[:min(len(cands), p.Limit)]
	args := []any{p.Token, p.Until}
	in := make([]string, len(cands))
	for i, c := range cands {
		args = append(args, c.id)
		in[i] = "?"
	}
	args = append(args, p.Now, p.Now)
	if _, err := e.w.ExecContext(ctx, `UPDATE webhook_deliveries AS d SET claim = ?, claimed_until = ?
		WHERE d.id IN (`+strings.Join(in, ", ")+`) AND `+dueWhere+`
		AND d.endpoint_id IN (SELECT id FROM webhook_endpoints WHERE enabled)`, args...); err != nil {
		return nil, err
	}
	return driver.ScanClaimed(e.w.QueryContext(ctx, `SELECT d.id, d.message_id, d.endpoint_id, m.event_type, m.payload,
		w.url, w.format, w.secret, w.previous_secret, w.previous_secret_until, d.attempts, w.failing_since
		FROM webhook_deliveries d JOIN webhook_messages m ON m.id = d.message_id
		JOIN webhook_endpoints w ON w.id = d.endpoint_id WHERE d.claim = ?`, p.Token))
}

// DeliveryRecordAttempt runs its three statements in one transaction of the
// single writer. The attempt is kept even if the lease passed and another
// dispatcher took the delivery over: the request was sent.
func (e *executor) DeliveryRecordAttempt(ctx context.Context, p *driver.DeliveryRecordAttemptParams) error {
	return e.inTx(ctx, func(q querier) error { return recordAttempt(ctx, q, p) })
}

// DeliveryRecordAttempts records each attempt in turn in one transaction of
// the single writer: one commit for the batch.
func (e *executor) DeliveryRecordAttempts(ctx context.Context, ps []*driver.DeliveryRecordAttemptParams) error {
	return e.inTx(ctx, func(q querier) error {
		for _, p := range ps {
			if err := recordAttempt(ctx, q, p); err != nil {
				return err
			}
		}
		return nil
	})
}

func recordAttempt(ctx context.Context, q querier, p *driver.DeliveryRecordAttemptParams) error {
	// A delivery deleted meanwhile (with its endpoint) keeps nothing.
	if _, err := q.ExecContext(ctx, `INSERT INTO webhook_attempts (id, delivery_id, attempted_at, status_code,
		latency_ms, response_excerpt, error) SELECT ?, ?, ?, ?, ?, ?, ?
		WHERE EXISTS (SELECT 1 FROM webhook_deliveries WHERE id = ?)`,
		p.AttemptID, p.DeliveryID, p.Now, p.StatusCode, p.LatencyMS, p.Excerpt, p.Error, p.DeliveryID); err != nil {
		return err
	}
	if _, err := q.ExecContext(ctx, `UPDATE webhook_deliveries SET state = ?, attempts = ?,
		next_attempt_at = coalesce(?, next_attempt_at), last_status = ?, last_error = ?, claim = NULL,
		claimed_until = NULL, updated_at = ? WHERE id = ? AND claim = ?`,
		p.State, p.Attempts, p.NextAttempt, p.StatusCode, p.Error, p.Now, p.DeliveryID, p.Claim); err != nil {
		return err
	}
	var err error
	switch p.Endpoint {
	case driver.EndpointSucceeded:
		_, err = q.ExecContext(ctx, `UPDATE webhook_endpoints SET failing_since = NULL
			WHERE id = ? AND failing_since IS NOT NULL`, p.EndpointID)
	case driver.EndpointDisable:
		_, err = q.ExecContext(ctx, `UPDATE webhook_endpoints SET enabled = false, disabled_reason = ?,
			updated_at = ? WHERE id = ?`, p.DisableWhy, p.Now, p.EndpointID)
	default:
		_, err = q.ExecContext(ctx, `UPDATE webhook_endpoints SET failing_since = ?
			WHERE id = ? AND failing_since IS NULL`, p.Now, p.EndpointID)
	}
	return err
}

// DeliveryQueueStats: min() of a datetime column comes back as text.
func (e *executor) DeliveryQueueStats(ctx context.Context) (int64, *time.Time, error) {
	var n int64
	var oldest *string
	err := e.r.QueryRowContext(ctx, `SELECT count(*), min(d.created_at) FROM webhook_deliveries d
		JOIN webhook_endpoints w ON w.id = d.endpoint_id WHERE d.state = 'pending' AND w.enabled`).Scan(&n, &oldest)
	if err != nil || oldest == nil {
		return n, nil, err
	}
	t, err := time.Parse("2006-01-02 15:04:05.999999999-07:00", *oldest)
	if err != nil {
		return n, nil, fmt.Errorf("sqlitedriver: read oldest delivery time %q: %w", *oldest, err)
	}
	t = t.UTC()
	return n, &t, nil
}

func (e *executor) MessagePrune(ctx context.Context, p *driver.PruneParams) (int64, error) {
	res, err := e.w.ExecContext(ctx, fmt.Sprintf(`DELETE FROM webhook_messages WHERE id IN (SELECT m.id
		FROM webhook_messages m WHERE m.created_at < ? AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d
		WHERE d.message_id = m.id AND d.state = 'pending') LIMIT %d)`, p.Limit), p.Before.UTC())
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}
