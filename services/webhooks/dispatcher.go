package webhooks

import (
	"bytes"
	"cmp"
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

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/driver"
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
	st     *services.Store
	log    *slog.Logger
	client *http.Client
	now    func() time.Time
	cfg    DispatcherConfig

	wake     chan struct{}
	mu       sync.Mutex
	inflight map[string]int // per endpoint
	total    int
	slotFree chan struct{}
}

// DispatcherConfig is how a Dispatcher is built; a zero field takes its
// default.
type DispatcherConfig struct {
	// Policy decides which addresses a delivery may connect to.
	Policy AddressPolicy
	// PublicURL makes links to actions in Slack messages.
	PublicURL string
	// DisableAfter disables an endpoint that has failed without a success
	// for this long (5 days).
	DisableAfter time.Duration
	// Workers bounds the sends in flight (DefaultWorkers); PerEndpoint
	// bounds them per endpoint (DefaultPerEndpoint).
	Workers, PerEndpoint int
	// Poll is how often the dispatcher looks for due deliveries when nothing
	// woke it (1 s).
	Poll time.Duration
	// Lease is how long a claimed delivery is reserved for its sender (1 min).
	Lease time.Duration
	// OnResult observes every attempt: "succeeded", "retrying" or "failed".
	OnResult func(result string, latency time.Duration)
	// RetrySchedule is the waits between attempts (the package's
	// RetrySchedule); tests retry in milliseconds, and a deployment may want
	// a schedule of its own.
	RetrySchedule []time.Duration
}

// The sends a dispatcher has in flight, in all and per endpoint, unless its
// config says.
const (
	DefaultWorkers     = 128
	DefaultPerEndpoint = 32
)

// SendTimeout bounds one webhook request.
const SendTimeout = 15 * time.Second

// NewDispatcher returns a dispatcher that reaches only what policy allows.
func NewDispatcher(st *services.Store, log *slog.Logger, cfg DispatcherConfig) *Dispatcher {
	transport := &http.Transport{
		DialContext:           cfg.Policy.DialContext,
		Proxy:                 nil, // a proxy would hide the dialled address from the policy
		MaxIdleConnsPerHost:   16,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: SendTimeout,
	}
	cfg.DisableAfter = cmp.Or(cfg.DisableAfter, 5*24*time.Hour)
	cfg.Workers, cfg.PerEndpoint = cmp.Or(cfg.Workers, DefaultWorkers), cmp.Or(cfg.PerEndpoint, DefaultPerEndpoint)
	cfg.Poll, cfg.Lease = cmp.Or(cfg.Poll, time.Second), cmp.Or(cfg.Lease, time.Minute)
	if cfg.RetrySchedule == nil {
		cfg.RetrySchedule = RetrySchedule
	}
	return &Dispatcher{
		st: st, log: log, now: services.Now, cfg: cfg,
		client: &http.Client{Transport: transport, Timeout: SendTimeout,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		wake: make(chan struct{}, 1), inflight: map[string]int{}, slotFree: make(chan struct{}, 1),
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
	rec := make(chan *attempt, recordQueue)
	recorded := make(chan struct{})
	go func() {
		defer close(recorded)
		d.recordLoop(context.WithoutCancel(ctx), rec)
	}()
	defer func() {
		wg.Wait()
		close(rec)
		<-recorded
	}()
	if t, ok := d.client.Transport.(*http.Transport); ok {
		// Keep a connection for every send that may be in flight, even
		// when several endpoints share a host.
		t.MaxIdleConnsPerHost = max(t.MaxIdleConnsPerHost, d.cfg.Workers)
	}
	t := time.NewTicker(d.cfg.Poll)
	defer t.Stop()
	for {
		full, err := d.dispatch(ctx, &wg, rec)
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

// recordQueue bounds the attempts sent and waiting to be recorded (no
// more than the workers can be); recordBatch bounds the attempts recorded
// in one statement.
const (
	recordQueue = 1024
	recordBatch = 512
)

// due is a claimed delivery with the secrets to sign it with.
type due struct {
	*driver.ClaimedDelivery
	claim   string
	secrets []string
}

// dispatch claims as many due deliveries as there are free slots, never
// more of an endpoint than it has free, and starts sending them. It reports
// whether it filled every free slot.
func (d *Dispatcher) dispatch(ctx context.Context, wg *sync.WaitGroup, rec chan<- *attempt) (bool, error) {
	d.mu.Lock()
	free := d.cfg.Workers - d.total
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
		d.inflight[c.EndpointID]++
		d.total++
	}
	d.mu.Unlock()
	for _, c := range claimed {
		wg.Go(func() {
			a := d.send(context.WithoutCancel(ctx), c)
			// The slot stays taken until the attempt is recorded: until
			// then the delivery is still leased.
			a.done = make(chan struct{})
			rec <- a
			<-a.done
			d.mu.Lock()
			if d.inflight[c.EndpointID]--; d.inflight[c.EndpointID] <= 0 {
				delete(d.inflight, c.EndpointID)
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
	// Once claimed, the deliveries are sent even if ctx ends now: the claim
	// must not commit and then fail half-way through the answer, stranding
	// deliveries for a whole lease.
	ctx = context.WithoutCancel(ctx)
	token := uuid.NewString()
	claimed, err := d.st.Executor().DeliveryClaim(ctx, &driver.DeliveryClaimParams{Token: token, Now: now,
		Until: now.Add(d.cfg.Lease), Limit: limit, PerEndpoint: d.cfg.PerEndpoint, Busy: busy})
	if err != nil {
		return nil, services.DBError("webhooks: claim deliveries", err)
	}
	out := make([]due, 0, len(claimed))
	for _, c := range claimed {
		dc := due{ClaimedDelivery: c, claim: token}
		dc.secrets = []string{c.Secret}
		if c.PreviousSecret != nil && c.PreviousSecretUntil != nil && c.PreviousSecretUntil.After(now) {
			dc.secrets = append(dc.secrets, *c.PreviousSecret)
		}
		out = append(out, dc)
	}
	return out, nil
}

// outcome of one send.
type sendResult struct {
	status     int
	latency    time.Duration
	excerpt    string
	err        error
	retryAfter time.Duration
}

// send sends a claimed delivery once and returns the attempt to record.
func (d *Dispatcher) send(ctx context.Context, c due) *attempt {
	body, err := d.body(c)
	var res sendResult
	if err != nil {
		res.err = err
	} else {
		res = d.post(ctx, c, body)
	}
	return d.attempt(c, res)
}

func (d *Dispatcher) body(c due) ([]byte, error) {
	if c.Format != FormatSlack {
		return c.Payload, nil
	}
	return slackBody(c.Payload, d.cfg.PublicURL)
}

func (d *Dispatcher) post(ctx context.Context, c due, body []byte) sendResult {
	ts := d.now()
	msgID := "msg_" + c.MessageID
	sig, err := signatures(c.secrets, msgID, ts, body)
	if err != nil {
		return sendResult{err: err}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.URL, bytes.NewReader(body))
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

// attempt is a finished send waiting to be recorded.
type attempt struct {
	p       *driver.DeliveryRecordAttemptParams
	result  string // for OnResult
	latency time.Duration
	done    chan struct{} // closed once recorded (or failed to be)
}

// recordLoop records the attempts that rec brings, as many as have arrived
// in one statement (those that arrive while one is written go in the
// next), until rec is closed. An attempt that fails to be recorded leaves
// its delivery claimed: it is sent again when its lease passes, as after a
// crash.
func (d *Dispatcher) recordLoop(ctx context.Context, rec <-chan *attempt) {
	batch := make([]*attempt, 0, recordBatch)
	ps := make([]*driver.DeliveryRecordAttemptParams, 0, recordBatch)
	for a := range rec {
		batch = append(batch[:0], a)
	more:
		for len(batch) < recordBatch {
			select {
			case a, ok := <-rec:
				if !ok {
					break more
				}
				batch = append(batch, a)
			default:
				break more
			}
		}
		ps = ps[:0]
		for _, a := range batch {
			ps = append(ps, a.p)
		}
		if err := d.st.Executor().DeliveryRecordAttempts(ctx, ps); err != nil {
			d.log.Error("webhooks: record attempts", "deliveries", len(ps), "err", services.DBError("webhooks: record attempts", err))
		}
		for _, a := range batch {
			if a.p.Endpoint == driver.EndpointDisable {
				d.log.Warn("webhooks: endpoint disabled", "endpoint", a.p.EndpointID, "reason", a.p.DisableWhy)
			}
			if d.cfg.OnResult != nil {
				d.cfg.OnResult(a.result, a.latency)
			}
			close(a.done)
		}
	}
}

// attempt turns a send's result into what recording it writes: the attempt,
// and the delivery moved on (done, retried later, or failed); a 410 Gone or
// a failure streak longer than DisableAfter disables the endpoint.
func (d *Dispatcher) attempt(c due, r sendResult) *attempt {
	now := d.now()
	ok := r.err == nil && r.status >= 200 && r.status < 300
	attempts := c.Attempts + 1
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
	case attempts > len(d.cfg.RetrySchedule):
		state, result = DeliveryFailed, "failed"
	default:
		wait := jitter(d.cfg.RetrySchedule[attempts-1])
		if r.retryAfter > wait {
			wait = min(r.retryAfter, 24*time.Hour)
		}
		at := now.Add(wait)
		state, next, result = DeliveryPending, &at, "retrying"
	}
	if !ok && disable == "" && c.FailingSince != nil && now.Sub(*c.FailingSince) > d.cfg.DisableAfter {
		disable = fmt.Sprintf("failing without a success since %s", c.FailingSince.UTC().Format(time.RFC3339))
	}
	p := &driver.DeliveryRecordAttemptParams{AttemptID: driver.NewID(), DeliveryID: c.ID, Claim: c.claim, Now: now,
		StatusCode: status, LatencyMS: int(r.latency.Milliseconds()), Excerpt: r.excerpt, Error: errText,
		State: state, Attempts: attempts, NextAttempt: next, EndpointID: c.EndpointID, Endpoint: driver.EndpointFailing}
	switch {
	case ok:
		p.Endpoint = driver.EndpointSucceeded
	case disable != "":
		p.Endpoint, p.DisableWhy = driver.EndpointDisable, disable
	}
	return &attempt{p: p, result: result, latency: r.latency}
}

// jitter spreads a wait by ±10% so retries of many deliveries do not arrive
// together.
func jitter(d time.Duration) time.Duration {
	return d + time.Duration((rand.Float64()*0.2-0.1)*float64(d))
}

// slackBody turns a standard message into a Slack incoming-webhook message
// with a link to the action.
func slackBody(payload []byte, publicURL string) ([]byte, error) {
	var m services.MessageBody
	if err := json.Unmarshal(payload, &m); err != nil {
		return nil, fmt.Errorf("webhooks: read message: %w", err)
	}
	var lines []string
	title := string(m.Type)
	if a := m.Data.Action; a != nil {
		link := strings.TrimRight(publicURL, "/") + "/actions/" + a.ID
		// text is the notification line, and Slack parses markup there too.
		title = fmt.Sprintf("%s: %s in %s", m.Type, slackEscape(a.Tool), a.Namespace)
		lines = append(lines, fmt.Sprintf("*%s* — <%s|%s>", slackEscape(string(m.Type)), link, slackEscape(a.Key)),
			fmt.Sprintf("namespace `%s` · tool `%s` · status *%s* · attempt %d", slackEscape(a.Namespace),
				slackEscape(a.Tool), a.Status, a.Attempt))
		if a.Reference != nil {
			lines = append(lines, "reference: "+slackEscape(*a.Reference))
		}
	} else if f := m.Data.Freeze; f != nil {
		title = fmt.Sprintf("%s: %s in %s", m.Type, slackEscape(strings.Join(f.Tools, ", ")), f.Namespace)
		lines = append(lines, fmt.Sprintf("*%s* — namespace `%s` · tools `%s`", slackEscape(string(m.Type)),
			slackEscape(f.Namespace), slackEscape(strings.Join(f.Tools, ", "))),
			fmt.Sprintf("started by %s: %s", slackEscape(f.By.Name), slackEscape(f.Reason)))
		if f.LiftedBy != nil && f.LiftReason != nil {
			lines = append(lines, fmt.Sprintf("lifted by %s: %s", slackEscape(f.LiftedBy.Name), slackEscape(*f.LiftReason)))
		}
		lines = append(lines, "<"+strings.TrimRight(publicURL, "/")+"/freezes|freezes>")
	} else {
		lines = append(lines, "*"+slackEscape(string(m.Type))+"* — a test message from Arbiter")
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

// QueueOf reads the webhook queue of st for the metrics' gauges: the
// pending deliveries of enabled endpoints and the age of the oldest. Those
// of a disabled endpoint wait for an admin, not for the dispatcher: counted,
// they would make the oldest pending age grow for as long as the endpoint
// stays off and hide a queue that is really stuck.
func QueueOf(st *services.Store) func(ctx context.Context) (QueueStats, error) {
	return func(ctx context.Context) (QueueStats, error) {
		n, oldest, err := st.Executor().DeliveryQueueStats(ctx)
		if err != nil {
			return QueueStats{}, services.DBError("webhooks: queue stats", err)
		}
		q := QueueStats{Pending: n}
		if oldest != nil {
			q.OldestPendingAge = services.Now().Sub(*oldest)
		}
		return q, nil
	}
}
