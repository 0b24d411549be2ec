package services

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"

	"github.com/arbiter-ledger/arbiter/models"
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
	t := time.NewTicker(d.Poll)
	defer t.Stop()
	for {
		n, err := d.dispatch(ctx, &wg)
		if err != nil && ctx.Err() == nil {
			d.log.Error("webhooks: dispatch failed", "err", err)
		}
		if n > 0 {
			continue // there may be more due right away
		}
		select {
		case <-ctx.Done():
			return
		case <-d.wake:
		case <-d.slotFree:
		case <-t.C:
		}
	}
}

// due is a claimed delivery with what sending it needs.
type due struct {
	id, claim, messageID, endpointID, eventType, url, format string
	payload                                                  []byte
	secrets                                                  []string
	attempts                                                 int
	failingSince                                             *time.Time
}

// dispatch claims as many due deliveries as there are free slots and starts
// sending them. It returns how many it started.
func (d *Dispatcher) dispatch(ctx context.Context, wg *sync.WaitGroup) (int, error) {
	d.mu.Lock()
	free := d.Workers - d.total
	// Endpoints at their bound are left out of the claim: their backlog
	// would otherwise fill every claim and hold up everyone else's alerts.
	var full []string
	for ep, n := range d.inflight {
		if n >= d.PerEndpoint {
			full = append(full, ep)
		}
	}
	d.mu.Unlock()
	if free <= 0 {
		return 0, nil
	}
	claimed, err := d.claim(ctx, free, full)
	if err != nil || len(claimed) == 0 {
		return 0, err
	}
	started := 0
	var release []due
	for _, c := range claimed {
		d.mu.Lock()
		ok := d.inflight[c.endpointID] < d.PerEndpoint
		if ok {
			d.inflight[c.endpointID]++
			d.total++
		}
		d.mu.Unlock()
		if !ok {
			release = append(release, c)
			continue
		}
		started++
		wg.Go(func() {
			d.send(context.WithoutCancel(ctx), c)
			d.mu.Lock()
			d.inflight[c.endpointID]--
			d.total--
			d.mu.Unlock()
			select {
			case d.slotFree <- struct{}{}:
			default:
			}
		})
	}
	for _, c := range release {
		d.st.wdb.WithContext(ctx).Model(&models.WebhookDelivery{}).Where("id = ? AND claim = ?", c.id, c.claim).
			Updates(map[string]any{"claim": nil, "claimed_until": nil})
	}
	return started, nil
}

func (d *Dispatcher) claim(ctx context.Context, limit int, skipEndpoints []string) ([]due, error) {
	now := d.now()
	token := uuid.NewString()
	args := []any{token, now.Add(d.Lease), now}
	skip := ""
	for _, ep := range skipEndpoints {
		args = append(args, ep)
		skip += ` AND d.endpoint_id <> $` + strconv.Itoa(len(args))
	}
	q := `UPDATE webhook_deliveries SET claim = $1, claimed_until = $2
		WHERE id IN (SELECT d.id FROM webhook_deliveries d JOIN webhook_endpoints w ON w.id = d.endpoint_id
			WHERE d.state = 'pending' AND d.next_attempt_at <= $3 AND w.enabled
			AND (d.claimed_until IS NULL OR d.claimed_until < $3)` + skip + `
			ORDER BY d.next_attempt_at LIMIT ` + strconv.Itoa(limit)
	if d.st.Dialect == Postgres {
		q += ` FOR UPDATE OF d SKIP LOCKED`
	}
	q += `)`
	if _, err := d.st.wsq.ExecContext(ctx, d.st.rebind(q), args...); err != nil {
		return nil, dbError("webhooks: claim deliveries", err)
	}
	// Once claimed, the deliveries are sent even if ctx ends now: reading
	// them must not fail half-way and strand them for a whole lease.
	rows, err := d.st.rsq.QueryContext(context.WithoutCancel(ctx), d.st.rebind(`SELECT d.id, d.message_id, d.endpoint_id, m.event_type,
		m.payload, w.url, w.format, w.secret, w.previous_secret, w.previous_secret_until, d.attempts, w.failing_since
		FROM webhook_deliveries d JOIN webhook_messages m ON m.id = d.message_id
		JOIN webhook_endpoints w ON w.id = d.endpoint_id WHERE d.claim = $1`), token)
	if err != nil {
		return nil, dbError("webhooks: read claimed deliveries", err)
	}
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
	res.excerpt = strings.ToValidUTF8(string(excerpt), "�")
	res.retryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), d.now())
	return res
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
		s := r.err.Error()
		errText = &s
	} else if !ok {
		s := fmt.Sprintf("receiver answered %d", r.status)
		errText = &s
	}
	var status *int
	if r.status != 0 {
		status = &r.status
	}
	result := "succeeded"
	set := map[string]any{"attempts": attempts, "last_status": status, "last_error": errText, "claim": nil,
		"claimed_until": nil, "updated_at": now}
	var disable string
	switch {
	case ok:
		set["state"] = DeliverySucceeded
	case r.status == http.StatusGone:
		set["state"], result = DeliveryFailed, "failed"
		disable = "the receiver answered 410 Gone"
	case attempts > len(d.schedule):
		set["state"], result = DeliveryFailed, "failed"
	default:
		wait := jitter(d.schedule[attempts-1])
		if r.retryAfter > wait {
			wait = min(r.retryAfter, 24*time.Hour)
		}
		set["next_attempt_at"], result = now.Add(wait), "retrying"
	}
	if !ok && disable == "" && c.failingSince != nil && now.Sub(*c.failingSince) > d.DisableAfter {
		disable = fmt.Sprintf("failing without a success since %s", c.failingSince.UTC().Format(time.RFC3339))
	}
	err := d.st.wdb.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Create(&models.WebhookAttempt{ID: newID(), DeliveryID: c.id, AttemptedAt: now, StatusCode: status,
			LatencyMs: int(r.latency.Milliseconds()), ResponseExcerpt: r.excerpt, Error: errText}).Error; err != nil {
			return err
		}
		if err := tx.Model(&models.WebhookDelivery{}).Where("id = ? AND claim = ?", c.id, c.claim).Updates(set).Error; err != nil {
			return err
		}
		ep := tx.Model(&models.WebhookEndpoint{}).Where("id = ?", c.endpointID)
		switch {
		case ok:
			return ep.Where("failing_since IS NOT NULL").Update("failing_since", nil).Error
		case disable != "":
			return ep.Updates(map[string]any{"enabled": false, "disabled_reason": disable, "updated_at": now}).Error
		default:
			return ep.Where("failing_since IS NULL").Update("failing_since", now).Error
		}
	})
	if disable != "" {
		d.log.Warn("webhooks: endpoint disabled", "endpoint", c.endpointID, "reason", disable)
	}
	if d.OnResult != nil {
		d.OnResult(result, r.latency)
	}
	return dbErrorOrNil("webhooks: record attempt", err)
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
