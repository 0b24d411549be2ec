package services

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
)

// RetrySchedule is the wait before each retry of a failed delivery, in the
// spirit of Svix: the first attempt is immediate, then 5 s, 5 min, 30 min,
// 2 h, 5 h, 10 h and 10 h. After the last, the delivery has failed.
var RetrySchedule = []time.Duration{5 * time.Second, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour,
	5 * time.Hour, 10 * time.Hour, 10 * time.Hour}

// Dispatcher sends due webhook deliveries. Several dispatchers (one per
// serve process) may share a PostgreSQL database: a delivery is claimed with
// FOR UPDATE SKIP LOCKED and a lease longer than a send can take, so no two
// send it at the same time, and one abandoned by a crashed process is taken
// up again when its lease passes.
type Dispatcher struct {
	st     *Store
	log    *slog.Logger
	client *http.Client
	now    func() time.Time

	// PublicURL makes links to actions in Slack messages.
	PublicURL string
	// DisableAfter disables an endpoint that has failed without a success
	// for this long.
	DisableAfter time.Duration
	// Workers bounds the sends in flight; PerEndpoint bounds them per
	// endpoint.
	Workers, PerEndpoint int
	// Poll is how often the dispatcher looks for due deliveries when nothing
	// woke it.
	Poll time.Duration
	// Lease is how long a claimed delivery is reserved for its sender.
	Lease time.Duration
	// OnResult observes every attempt: "succeeded", "retrying" or "failed".
	OnResult func(result string, latency time.Duration)
	// schedule is RetrySchedule; tests give a dispatcher shorter waits.
	schedule []time.Duration

	wake     chan struct{}
	mu       sync.Mutex
	inflight map[string]int // per endpoint
	total    int
	slotFree chan struct{}
}

// SendTimeout bounds one webhook request.
const SendTimeout = 15 * time.Second

// NewDispatcher returns a dispatcher that reaches only what policy allows.
func NewDispatcher(st *Store, log *slog.Logger, policy AddressPolicy) *Dispatcher {
	transport := &http.Transport{
		DialContext:           policy.DialContext,
		Proxy:                 nil, // a proxy would hide the dialled address from the policy
		MaxIdleConnsPerHost:   16,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: SendTimeout,
	}
	return &Dispatcher{
		st: st, log: log, now: utcNow,
		client: &http.Client{Transport: transport, Timeout: SendTimeout,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		DisableAfter: 5 * 24 * time.Hour, Workers: 64, PerEndpoint: 16, Poll: time.Second, Lease: time.Minute,
		schedule: RetrySchedule,
		wake:     make(chan struct{}, 1), inflight: map[string]int{}, slotFree: make(chan struct{}, 1),
	}
}

// Wake makes the dispatcher look for due deliveries now. It never blocks.
func (d *Dispatcher) Wake() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// Run dispatches until ctx ends, then waits for sends in flight.
func (d *Dispatcher) Run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	if t, ok := d.client.Transport.(*http.Transport); ok {
		// Keep a connection for every send that may be in flight, even
		// when several endpoints share a host.
		t.MaxIdleConnsPerHost = max(t.MaxIdleConnsPerHost, d.Workers)
	}
	t := time.NewTicker(d.Poll)
	defer t.Stop()
	for {
		full, err := d.dispatch(ctx, &wg)
		if err != nil && ctx.Err() == nil {
			d.log.Error("webhooks: dispatch failed", "err", err)
		}
		if full {
			continue // every free slot was filled: there may be more due right away
		}
		select {
		case <-ctx.Done():
			return
		case <-d.wake:
		case <-d.slotFree:
			// Sends of a busy endpoint end one after another: gathering
			// them for a moment lets one claim start several sends.
			select {
			case <-ctx.Done():
				return
			case <-d.wake:
			case <-time.After(claimGather):
			}
		case <-t.C:
		}
	}
}

// claimGather is how long the dispatcher lets sends end before claiming
// deliveries for their slots.
const claimGather = 2 * time.Millisecond

// due is a claimed delivery with what sending it needs.
type due struct {
	id, claim, messageID, endpointID, eventType, url, format string
	payload                                                  []byte
	secrets                                                  []string
	attempts                                                 int
	failingSince                                             *time.Time
}

// dispatch claims as many due deliveries as there are free slots, never
// more of an endpoint than it has free, and starts sending them. It reports
// whether it filled every free slot.
func (d *Dispatcher) dispatch(ctx context.Context, wg *sync.WaitGroup) (bool, error) {
	d.mu.Lock()
	free := d.Workers - d.total
	// Endpoints at their bound get nothing: their backlog would otherwise
	// fill every claim and hold up everyone else's alerts. Only this loop
	// adds to inflight, so the slots counted here can only grow before the
	// claimed deliveries are started.
	busy := make(map[string]int, len(d.inflight))
	for ep, n := range d.inflight {
		busy[ep] = n
	}
	d.mu.Unlock()
	if free <= 0 {
		return false, nil
	}
	claimed, err := d.claim(ctx, free, busy)
	if err != nil || len(claimed) == 0 {
		return false, err
	}
	d.mu.Lock()
	for _, c := range claimed {
		d.inflight[c.endpointID]++
		d.total++
	}
	d.mu.Unlock()
	for _, c := range claimed {
		wg.Go(func() {
			d.send(context.WithoutCancel(ctx), c)
			d.mu.Lock()
			if d.inflight[c.endpointID]--; d.inflight[c.endpointID] <= 0 {
				delete(d.inflight, c.endpointID)
			}
			d.total--
			d.mu.Unlock()
			select {
			case d.slotFree <- struct{}{}:
			default:
			}
		})
	}
	return len(claimed) == free, nil
}

// claim leases up to limit due deliveries of enabled endpoints, oldest
// first and at most PerEndpoint − busy[endpoint] of each endpoint, and
// returns what sending them needs. Other dispatchers skip the rows it locks
// and, once it commits, the lease.
func (d *Dispatcher) claim(ctx context.Context, limit int, busy map[string]int) ([]due, error) {
	now := d.now()
	token := uuid.NewString()
	// Once claimed, the deliveries are sent even if ctx ends now: the claim
	// must not commit and then fail half-way through the answer, stranding
	// deliveries for a whole lease.
	ctx = context.WithoutCancel(ctx)
	if d.st.Dialect == Postgres {
		return d.claimPostgres(ctx, token, now, limit, busy)
	}
	return d.claimSQLite(ctx, token, now, limit, busy)
}

// claimPostgres claims in one statement: for each enabled endpoint, its
// oldest due deliveries up to its free slots (a LATERAL over the endpoint's
// index range, FOR UPDATE SKIP LOCKED), the oldest limit of those leased and
// returned with their message and endpoint.
func (d *Dispatcher) claimPostgres(ctx context.Context, token string, now time.Time, limit int, busy map[string]int) ([]due, error) {
	eps, ns := make([]string, 0, len(busy)), make([]int32, 0, len(busy))
	for ep, n := range busy {
		eps, ns = append(eps, ep), append(ns, int32(n))
	}
	const q = `WITH busy AS (SELECT * FROM unnest($4::uuid[], $5::int[]) AS b (endpoint_id, n)),
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
	rows, err := d.st.wsq.QueryContext(ctx, q, token, now.Add(d.Lease), now, eps, ns, d.PerEndpoint, limit)
	if err != nil {
		return nil, dbError("webhooks: claim deliveries", err)
	}
	return d.scanClaimed(rows, token, now)
}

// claimSQLite claims with the single writer: the endpoints with due
// deliveries, each one's oldest up to its free slots, then the oldest limit
// of those leased in one UPDATE that checks again that they are free.
func (d *Dispatcher) claimSQLite(ctx context.Context, token string, now time.Time, limit int, busy map[string]int) ([]due, error) {
	const dueWhere = `d.state = 'pending' AND d.next_attempt_at <= ?1 AND (d.claimed_until IS NULL OR d.claimed_until < ?1)`
	rows, err := d.st.wsq.QueryContext(ctx, `SELECT w.id FROM webhook_endpoints w WHERE w.enabled
		AND EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.endpoint_id = w.id AND `+dueWhere+`)`, now)
	if err != nil {
		return nil, dbError("webhooks: claim deliveries", err)
	}
	var eps []string
	for rows.Next() {
		var ep string
		if err := rows.Scan(&ep); err != nil {
			rows.Close()
			return nil, dbError("webhooks: claim deliveries", err)
		}
		eps = append(eps, ep)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, dbError("webhooks: claim deliveries", err)
	}
	type candidate struct {
		id   string
		next time.Time
	}
	var cands []candidate
	for _, ep := range eps {
		slots := min(d.PerEndpoint-busy[ep], limit)
		if slots <= 0 {
			continue
		}
		rows, err := d.st.wsq.QueryContext(ctx, `SELECT d.id, d.next_attempt_at FROM webhook_deliveries d
			WHERE d.endpoint_id = ?2 AND `+dueWhere+` ORDER BY d.next_attempt_at LIMIT ?3`, now, ep, slots)
		if err != nil {
			return nil, dbError("webhooks: claim deliveries", err)
		}
		for rows.Next() {
			var c candidate
			if err := rows.Scan(&c.id, &c.next); err != nil {
				rows.Close()
				return nil, dbError("webhooks: claim deliveries", err)
			}
			cands = append(cands, c)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, dbError("webhooks: claim deliveries", err)
		}
	}
	if len(cands) == 0 {
		return nil, nil
	}
	slices.SortStableFunc(cands, func(a, b candidate) int { return a.next.Compare(b.next) })
	cands = cands[:min(len(cands), limit)]
	args := []any{now, token, now.Add(d.Lease)}
	in := make([]string, len(cands))
	for i, c := range cands {
		args = append(args, c.id)
		in[i] = "?" + strconv.Itoa(len(args))
	}
	if _, err := d.st.wsq.ExecContext(ctx, `UPDATE webhook_deliveries AS d SET claim = ?2, claimed_until = ?3
		WHERE d.id IN (`+strings.Join(in, ", ")+`) AND `+dueWhere+`
		AND d.endpoint_id IN (SELECT id FROM webhook_endpoints WHERE enabled)`, args...); err != nil {
		return nil, dbError("webhooks: claim deliveries", err)
	}
	rows, err = d.st.wsq.QueryContext(ctx, `SELECT d.id, d.message_id, d.endpoint_id, m.event_type, m.payload,
		w.url, w.format, w.secret, w.previous_secret, w.previous_secret_until, d.attempts, w.failing_since
		FROM webhook_deliveries d JOIN webhook_messages m ON m.id = d.message_id
		JOIN webhook_endpoints w ON w.id = d.endpoint_id WHERE d.claim = ?1`, token)
	if err != nil {
		return nil, dbError("webhooks: read claimed deliveries", err)
	}
	return d.scanClaimed(rows, token, now)
}

// scanClaimed reads claimed deliveries and closes rows.
func (d *Dispatcher) scanClaimed(rows *sql.Rows, token string, now time.Time) ([]due, error) {
	defer rows.Close()
	var out []due
	for rows.Next() {
		c := due{claim: token}
		var secret string
		var prev *string
		var prevUntil *time.Time
		if err := rows.Scan(&c.id, &c.messageID, &c.endpointID, &c.eventType, &c.payload, &c.url, &c.format,
			&secret, &prev, &prevUntil, &c.attempts, &c.failingSince); err != nil {
			return nil, dbError("webhooks: read claimed deliveries", err)
		}
		c.secrets = []string{secret}
		if prev != nil && prevUntil != nil && prevUntil.After(now) {
			c.secrets = append(c.secrets, *prev)
		}
		out = append(out, c)
	}
	return out, dbErrorOrNil("webhooks: read claimed deliveries", rows.Err())
}

// outcome of one send.
type sendResult struct {
	status     int
	latency    time.Duration
	excerpt    string
	err        error
	retryAfter time.Duration
}

func (d *Dispatcher) send(ctx context.Context, c due) {
	body, err := d.body(c)
	var res sendResult
	if err != nil {
		res.err = err
	} else {
		res = d.post(ctx, c, body)
	}
	if err := d.record(ctx, c, res); err != nil {
		d.log.Error("webhooks: record attempt", "delivery", c.id, "err", err)
	}
}

func (d *Dispatcher) body(c due) ([]byte, error) {
	if c.format != FormatSlack {
		return c.payload, nil
	}
	return slackBody(c.payload, d.PublicURL)
}

func (d *Dispatcher) post(ctx context.Context, c due, body []byte) sendResult {
	ts := d.now()
	msgID := "msg_" + c.messageID
	sig, err := signatures(c.secrets, msgID, ts, body)
	if err != nil {
		return sendResult{err: err}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return sendResult{err: err}
	}
	h := req.Header
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", "Arbiter-Webhooks/1")
	h.Set("webhook-id", msgID)
	h.Set("webhook-timestamp", strconv.FormatInt(ts.Unix(), 10))
	h.Set("webhook-signature", sig)
	start := time.Now()
	resp, err := d.client.Do(req)
	res := sendResult{latency: time.Since(start)}
	if err != nil {
		res.err = err
		return res
	}
	defer resp.Body.Close()
	excerpt, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // let the connection be reused
	res.status = resp.StatusCode
	res.excerpt = dbText(string(excerpt))
	res.retryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), d.now())
	return res
}

// dbText makes s storable as text: valid UTF-8 without NUL bytes, which
// PostgreSQL refuses.
func dbText(s string) string {
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

func parseRetryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// record keeps the attempt and moves the delivery on: done, retried later,
// or failed; a 410 Gone or a failure streak longer than DisableAfter
// disables the endpoint.
func (d *Dispatcher) record(ctx context.Context, c due, r sendResult) error {
	now := d.now()
	ok := r.err == nil && r.status >= 200 && r.status < 300
	attempts := c.attempts + 1
	var errText *string
	if r.err != nil {
		s := dbText(r.err.Error())
		errText = &s
	} else if !ok {
		s := fmt.Sprintf("receiver answered %d", r.status)
		errText = &s
	}
	var status *int
	if r.status != 0 {
		status = &r.status
	}
	result, state := "succeeded", DeliverySucceeded
	var next *time.Time // nil keeps next_attempt_at
	var disable string
	switch {
	case ok:
	case r.status == http.StatusGone:
		state, result = DeliveryFailed, "failed"
		disable = "the receiver answered 410 Gone"
	case attempts > len(d.schedule):
		state, result = DeliveryFailed, "failed"
	default:
		wait := jitter(d.schedule[attempts-1])
		if r.retryAfter > wait {
			wait = min(r.retryAfter, 24*time.Hour)
		}
		at := now.Add(wait)
		state, next, result = DeliveryPending, &at, "retrying"
	}
	if !ok && disable == "" && c.failingSince != nil && now.Sub(*c.failingSince) > d.DisableAfter {
		disable = fmt.Sprintf("failing without a success since %s", c.failingSince.UTC().Format(time.RFC3339))
	}
	// The attempt is kept even if the lease passed and another dispatcher
	// took the delivery over: the request was sent.
	insertAttempt := `INSERT INTO webhook_attempts (id, delivery_id, attempted_at, status_code, latency_ms,
		response_excerpt, error) VALUES ($1, $2, $3, $4, $5, $6, $7)`
	attemptArgs := []any{newID(), c.id, now, status, int(r.latency.Milliseconds()), r.excerpt, errText}
	updateDelivery := `UPDATE webhook_deliveries SET state = $1, attempts = $2, next_attempt_at = coalesce($3, next_attempt_at),
		last_status = $4, last_error = $5, claim = NULL, claimed_until = NULL, updated_at = $6 WHERE id = $7 AND claim = $8`
	deliveryArgs := []any{state, attempts, next, status, errText, now, c.id, c.claim}
	var updateEndpoint string
	var endpointArgs []any
	switch {
	case ok:
		updateEndpoint = `UPDATE webhook_endpoints SET failing_since = NULL WHERE id = $1 AND failing_since IS NOT NULL`
		endpointArgs = []any{c.endpointID}
	case disable != "":
		updateEndpoint = `UPDATE webhook_endpoints SET enabled = false, disabled_reason = $2, updated_at = $3 WHERE id = $1`
		endpointArgs = []any{c.endpointID, disable, now}
	default:
		updateEndpoint = `UPDATE webhook_endpoints SET failing_since = $2 WHERE id = $1 AND failing_since IS NULL`
		endpointArgs = []any{c.endpointID, now}
	}
	var err error
	if d.st.Dialect == Postgres {
		// One statement, one round trip: data-modifying CTEs all run.
		q, args := "WITH attempt AS ("+insertAttempt+")", attemptArgs
		q, args = q+", delivery AS ("+shiftParams(updateDelivery, len(args))+")", append(args, deliveryArgs...)
		q, args = q+" "+shiftParams(updateEndpoint, len(args)), append(args, endpointArgs...)
		_, err = d.st.wsq.ExecContext(ctx, q, args...)
	} else {
		err = d.recordSQLite(ctx, [][]any{attemptArgs, deliveryArgs, endpointArgs}, insertAttempt, updateDelivery, updateEndpoint)
	}
	if disable != "" {
		d.log.Warn("webhooks: endpoint disabled", "endpoint", c.endpointID, "reason", disable)
	}
	if d.OnResult != nil {
		d.OnResult(result, r.latency)
	}
	return dbErrorOrNil("webhooks: record attempt", err)
}

// recordSQLite runs the statements of record in one transaction of the
// single writer.
func (d *Dispatcher) recordSQLite(ctx context.Context, args [][]any, stmts ...string) error {
	tx, err := d.st.wsq.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for i, q := range stmts {
		if _, err := tx.ExecContext(ctx, d.st.rebind(q), args[i]...); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// shiftParams renumbers the $n placeholders of q by offset, so statements
// written on their own can share one argument list.
func shiftParams(q string, offset int) string {
	return placeholder.ReplaceAllStringFunc(q, func(p string) string {
		n, _ := strconv.Atoi(p[1:])
		return "$" + strconv.Itoa(n+offset)
	})
}

// jitter spreads a wait by ±10% so retries of many deliveries do not arrive
// together.
func jitter(d time.Duration) time.Duration {
	return d + time.Duration((rand.Float64()*0.2-0.1)*float64(d))
}

// slackBody turns a standard message into a Slack incoming-webhook message
// with a link to the action.
func slackBody(payload []byte, publicURL string) ([]byte, error) {
	var m MessageBody
	if err := json.Unmarshal(payload, &m); err != nil {
		return nil, fmt.Errorf("webhooks: read message: %w", err)
	}
	var lines []string
	title := m.Type
	if a := m.Data.Action; a != nil {
		link := strings.TrimRight(publicURL, "/") + "/actions/" + a.ID
		// text is the notification line, and Slack parses markup there too.
		title = fmt.Sprintf("%s: %s in %s", m.Type, slackEscape(a.Tool), a.Namespace)
		lines = append(lines, fmt.Sprintf("*%s* — <%s|%s>", slackEscape(m.Type), link, slackEscape(a.Key)),
			fmt.Sprintf("namespace `%s` · tool `%s` · status *%s* · attempt %d", slackEscape(a.Namespace),
				slackEscape(a.Tool), a.Status, a.Attempt))
		if a.Reference != nil {
			lines = append(lines, "reference: "+slackEscape(*a.Reference))
		}
	} else {
		lines = append(lines, "*"+slackEscape(m.Type)+"* — a test message from Arbiter")
	}
	if dec := m.Data.Decision; dec != nil {
		lines = append(lines, fmt.Sprintf("%s decided *%s*: %s", slackEscape(dec.Operator), dec.Decision, slackEscape(dec.Reason)))
	}
	text := strings.Join(lines, "\n")
	return json.Marshal(map[string]any{
		"text":   title,
		"blocks": []any{map[string]any{"type": "section", "text": map[string]any{"type": "mrkdwn", "text": text}}},
	})
}

// slackEscape escapes the three characters Slack's mrkdwn treats as markup.
func slackEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// QueueStats describes the pending deliveries, for metrics.
type QueueStats struct {
	Pending          int64
	OldestPendingAge time.Duration
}

// Queue reports the pending deliveries of enabled endpoints. Those of a
// disabled endpoint wait for an admin, not for the dispatcher: counted, they
// would make the oldest pending age grow for as long as the endpoint stays
// off and hide a queue that is really stuck.
func (d *Dispatcher) Queue(ctx context.Context) (QueueStats, error) {
	var n int64
	var oldest *time.Time
	row := d.st.rsq.QueryRowContext(ctx, `SELECT count(*), min(d.created_at) FROM webhook_deliveries d
		JOIN webhook_endpoints w ON w.id = d.endpoint_id WHERE d.state = 'pending' AND w.enabled`)
	var raw any
	if err := row.Scan(&n, &raw); err != nil {
		return QueueStats{}, dbError("webhooks: queue stats", err)
	}
	switch v := raw.(type) {
	case time.Time:
		oldest = &v
	case string:
		if t, err := time.Parse("2006-01-02 15:04:05.999999999-07:00", v); err == nil {
			oldest = &t
		}
	}
	st := QueueStats{Pending: n}
	if oldest != nil {
		st.OldestPendingAge = d.now().Sub(*oldest)
	}
	return st, nil
}
