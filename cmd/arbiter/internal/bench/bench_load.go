package bench

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	mrand "math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The load generator plays agents, each a goroutine with its own keep-alive
// connection and its own memory of the keys it started and finished. It must
// cost the machine little next to the server it measures: requests go out
// on a minimal HTTP/1.1 client (bench_http.go), bodies are appended into a
// reused buffer, and responses are read into a reused buffer and scanned for
// outcomes and error codes rather than decoded.

type op int

const (
	opIntent op = iota
	opOutcome
	opHeartbeat
	opReplay
	numOps
)

var opNames = [numOps]string{"intent", "outcome", "heartbeat", "replay"}

// mix holds the weight of each kind of entry.
type mix struct {
	weights [numOps]int
	total   int
	spec    string
}

func parseMix(s string) (mix, error) {
	var m mix
	for part := range strings.SplitSeq(s, ",") {
		name, w, ok := strings.Cut(strings.TrimSpace(part), "=")
		i := slices.Index(opNames[:], name)
		n, err := strconv.Atoi(w)
		if !ok || i < 0 || err != nil || n < 0 {
			return mix{}, fmt.Errorf("--mix %q: want name=weight pairs like intent=70,outcome=20,heartbeat=5,replay=5 (names: %s)",
				s, strings.Join(opNames[:], ", "))
		}
		m.weights[i] += n
		m.total += n
	}
	if m.total == 0 {
		return mix{}, fmt.Errorf("--mix %q: the weights add up to 0", s)
	}
	parts := make([]string, 0, numOps)
	for i, w := range m.weights {
		if w > 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", opNames[i], w))
		}
	}
	m.spec = strings.Join(parts, ",")
	return m, nil
}

func (m mix) pick(r *mrand.Rand) op {
	n := r.IntN(m.total)
	for i, w := range m.weights {
		if n < w {
			return op(i)
		}
		n -= w
	}
	return opIntent
}

type loadConfig struct {
	url, key    string
	concurrency int
	duration    time.Duration
	batch       int
	mix         mix
	rate        float64 // requests per second in all; 0 is unpaced
	lease       int
	groups      int // business groups the intents' params spread over; 0: none
}

// latency summarises request durations in milliseconds.
type latency struct {
	Count int     `json:"count"`
	P50   float64 `json:"p50"`
	P95   float64 `json:"p95"`
	P99   float64 `json:"p99"`
	Max   float64 `json:"max"`
}

func summarize(ds []time.Duration) latency {
	if len(ds) == 0 {
		return latency{}
	}
	slices.Sort(ds)
	at := func(q float64) float64 {
		i := int(math.Ceil(q*float64(len(ds)))) - 1
		return float64(ds[max(i, 0)]) / 1e6
	}
	return latency{Count: len(ds), P50: at(0.50), P95: at(0.95), P99: at(0.99), Max: float64(ds[len(ds)-1]) / 1e6}
}

type loadReport struct {
	URL               string  `json:"url"`
	Concurrency       int     `json:"concurrency"`
	Batch             int     `json:"batch"`
	Mix               string  `json:"mix"`
	Rate              float64 `json:"target_requests_per_second,omitempty"`
	Seconds           float64 `json:"seconds"`
	Requests          int     `json:"requests"`
	Entries           int     `json:"entries"`
	EntriesPerSecond  float64 `json:"entries_per_second"`
	RequestsPerSecond float64 `json:"requests_per_second"`
	Latency           latency `json:"latency_ms"`
	// LatencyByKind is per kind of entry, for single-entry requests only.
	LatencyByKind map[string]latency `json:"latency_by_kind_ms"`
	Outcomes      map[string]int     `json:"outcomes"`
	Errors        map[string]int     `json:"errors"`
	FirstError    string             `json:"first_error,omitempty"`
}

func runLoad(ctx context.Context, cfg loadConfig) (*loadReport, error) {
	run := make([]byte, 4)
	rand.Read(run)
	agents := make([]*agent, cfg.concurrency)
	for i := range agents {
		a, err := newAgent(cfg, fmt.Sprintf("bench-%s-%d", hex.EncodeToString(run), i))
		if err != nil {
			return nil, err
		}
		defer a.conn.close()
		agents[i] = a
	}
	if err := preflight(ctx, cfg); err != nil {
		return nil, err
	}
	start := time.Now()
	end := start.Add(cfg.duration)
	var wg sync.WaitGroup
	for i, a := range agents {
		var first time.Time
		if cfg.rate > 0 {
			// Spread the agents' first requests over one interval.
			first = start.Add(time.Duration(float64(i) / cfg.rate * 1e9))
		}
		wg.Go(func() { a.loop(ctx, first, end) })
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()

	rep := &loadReport{URL: cfg.url, Concurrency: cfg.concurrency, Batch: cfg.batch, Mix: cfg.mix.spec, Rate: cfg.rate,
		Seconds: elapsed, LatencyByKind: map[string]latency{}, Outcomes: map[string]int{}, Errors: map[string]int{}}
	var all []time.Duration
	var byKind [numOps][]time.Duration
	for _, a := range agents {
		rep.Requests += a.requests
		rep.Entries += a.entries
		all = append(all, a.lat...)
		for k := range byKind {
			byKind[k] = append(byKind[k], a.latByKind[k]...)
		}
		for k, n := range a.outcomes {
			rep.Outcomes[k] += n
		}
		for k, n := range a.errors {
			rep.Errors[k] += n
		}
		if rep.FirstError == "" {
			rep.FirstError = a.firstError
		}
	}
	rep.Latency = summarize(all)
	for k, ds := range byKind {
		if len(ds) > 0 {
			rep.LatencyByKind[opNames[k]] = summarize(ds)
		}
	}
	rep.EntriesPerSecond = float64(rep.Entries) / elapsed
	rep.RequestsPerSecond = float64(rep.Requests) / elapsed
	return rep, ctx.Err()
}

// preflight fails fast on a wrong URL or key instead of reporting a run of
// errors.
func preflight(ctx context.Context, cfg loadConfig) error {
	req, err := http.NewRequestWithContext(ctx, "GET", cfg.url+"/v1/actions?limit=1", nil)
	if err != nil {
		return fmt.Errorf("--url: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+cfg.key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("reach %s: %w", cfg.url, err)
	}
	body, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("%s refused the API key with %s: %s", cfg.url, res.Status, bytes.TrimSpace(body))
	}
	return nil
}

// agent is one simulated agent.
type agent struct {
	cfg      loadConfig
	conn     *benchConn
	rng      *mrand.Rand
	prefix   string
	seq      int
	started  []string // keys whose attempt 1 holds a lease
	finished []string // keys that succeeded, for replays; bounded
	body     []byte
	resp     bytes.Buffer
	pending  []pendingEntry

	requests   int
	lat        []time.Duration
	latByKind  [numOps][]time.Duration
	entries    int
	outcomes   map[string]int
	errors     map[string]int
	firstError string
}

type pendingEntry struct {
	op  op
	key string
}

const maxFinished = 4096

func newAgent(cfg loadConfig, prefix string) (*agent, error) {
	conn, err := newBenchConn(cfg.url, "/v1/entries", cfg.key)
	if err != nil {
		return nil, err
	}
	return &agent{cfg: cfg, conn: conn, rng: mrand.New(mrand.NewPCG(mrand.Uint64(), mrand.Uint64())),
		prefix: prefix, lat: make([]time.Duration, 0, 1<<14), outcomes: map[string]int{}, errors: map[string]int{}}, nil
}

func (a *agent) loop(ctx context.Context, next, end time.Time) {
	var interval time.Duration
	if a.cfg.rate > 0 {
		interval = time.Duration(float64(a.cfg.concurrency) / a.cfg.rate * 1e9)
	}
	for ctx.Err() == nil {
		if interval > 0 {
			if d := time.Until(next); d > 0 {
				time.Sleep(d)
			}
		}
		now := time.Now()
		if !now.Before(end) {
			return
		}
		if interval > 0 {
			// A slow answer delays the schedule rather than causing a burst.
			if next = next.Add(interval); next.Before(now) {
				next = now
			}
		}
		a.send(ctx)
	}
}

// choose turns the mix's pick into an entry this agent can send now: an
// outcome or heartbeat needs a started key, a replay a finished one, and
// without them it sends a new intent.
func (a *agent) choose() pendingEntry {
	o := a.cfg.mix.pick(a.rng)
	switch {
	case o == opOutcome && len(a.started) > 0:
		i := a.rng.IntN(len(a.started))
		k := a.started[i]
		a.started[i] = a.started[len(a.started)-1]
		a.started = a.started[:len(a.started)-1]
		return pendingEntry{op: opOutcome, key: k}
	case o == opHeartbeat && len(a.started) > 0:
		return pendingEntry{op: opHeartbeat, key: a.started[a.rng.IntN(len(a.started))]}
	case o == opReplay && len(a.finished) > 0:
		return pendingEntry{op: opReplay, key: a.finished[a.rng.IntN(len(a.finished))]}
	}
	a.seq++
	return pendingEntry{op: opIntent, key: a.prefix + "-" + strconv.Itoa(a.seq)}
}

func (a *agent) appendEntry(b []byte, e pendingEntry) []byte {
	b = append(b, `{"key":"`...)
	b = append(b, e.key...)
	switch e.op {
	case opIntent, opReplay:
		b = append(b, `","type":"intent","tool":"bench.write","effect":"keyed","params":{"n":1`...)
		if a.cfg.groups > 0 {
			b = append(b, `,"customer":"c`...)
			// From the key, so that a replay offers the same params.
			h := fnv.New32a()
			h.Write([]byte(e.key))
			b = strconv.AppendUint(b, uint64(h.Sum32())%uint64(a.cfg.groups), 10)
			b = append(b, '"')
		}
		b = append(b, `},"timeout":`...)
		b = strconv.AppendInt(b, int64(a.cfg.lease), 10)
		return append(b, '}')
	case opOutcome:
		return append(b, `","type":"succeeded","attempt":1,"result":{"ok":true}}`...)
	default:
		b = append(b, `","type":"heartbeat","attempt":1,"timeout":`...)
		b = strconv.AppendInt(b, int64(a.cfg.lease), 10)
		return append(b, '}')
	}
}

func (a *agent) send(ctx context.Context) {
	a.pending = a.pending[:0]
	a.body = a.body[:0]
	batch := a.cfg.batch > 1
	if batch {
		a.body = append(a.body, `{"entries":[`...)
	}
	for i := range a.cfg.batch {
		e := a.choose()
		if i > 0 {
			a.body = append(a.body, ',')
		}
		a.body = a.appendEntry(a.body, e)
		a.pending = append(a.pending, e)
	}
	if batch {
		a.body = append(a.body, "]}"...)
	}
	t0 := time.Now()
	status, err := a.conn.post(a.body, &a.resp)
	d := time.Since(t0)
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		a.requests++
		a.fail("transport", err.Error())
		return
	}
	a.requests++
	a.lat = append(a.lat, d)
	if !batch {
		k := a.pending[0].op
		a.latByKind[k] = append(a.latByKind[k], d)
	}
	a.record(status)
}

func (a *agent) fail(code, msg string) {
	a.errors[code] += len(a.pending)
	if a.firstError == "" {
		a.firstError = code + ": " + msg
	}
}

// record reads the outcomes of the response in a.resp and updates what the
// agent knows about its keys.
func (a *agent) record(status int) {
	body := a.resp.Bytes()
	found := 0
	scanResults(body, func(outcome, code string) {
		if found >= len(a.pending) {
			return
		}
		e := a.pending[found]
		found++
		a.outcomes[outcome]++
		if outcome == "rejected" || code != "" {
			a.errors[cmp.Or(code, "rejected")]++
			if a.firstError == "" {
				a.firstError = fmt.Sprintf("%s %s: %s", opNames[e.op], e.key, code)
			}
			return
		}
		a.entries++
		switch {
		case e.op == opIntent && outcome == "proceed":
			a.started = append(a.started, e.key)
		case e.op == opOutcome && outcome == "recorded":
			if len(a.finished) < maxFinished {
				a.finished = append(a.finished, e.key)
			} else {
				a.finished[a.rng.IntN(maxFinished)] = e.key
			}
		}
	})
	if found == 0 {
		// The whole request failed: an error object without results.
		code := "http_" + strconv.Itoa(status)
		if c := scanString(body, `"code":"`); c != "" {
			code = c
		}
		a.errors[code] += len(a.pending)
		if a.firstError == "" {
			a.firstError = fmt.Sprintf("HTTP %d: %s", status, truncate(body, 300))
		}
	}
}

// scanResults calls fn with the outcome and error code (or "") of each
// result in an entries response, in order. It relies on the field order of
// services.EntryResult (outcome before error) and on the bench's own params
// and results, which hold neither field name.
func scanResults(body []byte, fn func(outcome, code string)) {
	const outcomeField, errorField = `"outcome":"`, `"error":{"code":"`
	for {
		i := bytes.Index(body, []byte(outcomeField))
		if i < 0 {
			return
		}
		body = body[i+len(outcomeField):]
		outcome := upToQuote(body)
		end := bytes.Index(body, []byte(outcomeField))
		if end < 0 {
			end = len(body)
		}
		fn(outcome, scanString(body[:end], errorField))
		body = body[end:]
	}
}

func scanString(b []byte, prefix string) string {
	i := bytes.Index(b, []byte(prefix))
	if i < 0 {
		return ""
	}
	return upToQuote(b[i+len(prefix):])
}

func upToQuote(b []byte) string {
	if j := bytes.IndexByte(b, '"'); j >= 0 {
		return string(b[:j])
	}
	return string(b)
}

func truncate(b []byte, n int) string {
	b = bytes.TrimSpace(b)
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}
