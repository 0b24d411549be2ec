package web

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/arbiter-ledger/arbiter/services/record"

	"github.com/labstack/echo/v4"

	"github.com/arbiter-ledger/arbiter/services"
)

// MaxBodyBytes bounds a request body.
const MaxBodyBytes = 1 << 20

// entrySubmitter is what the entries handler needs from the ledger.
type entrySubmitter interface {
	Submit(ctx context.Context, p services.Principal, raws [][]byte) ([]services.EntryResult, error)
	AwaitDecision(ctx context.Context, p services.Principal, id string) (*record.Action, error)
	AwaitDecisionFunc(p services.Principal, id string, wait time.Duration, done func(*record.Action, error)) (stop func())
	SubmitExistingMany(ctx context.Context, items []services.Released) ([]services.EntryResult, error)
}

// MaxWait bounds Prefer: wait=N.
const MaxWait = 60 * time.Second

// entriesHandler serves POST /v1/entries.
type entriesHandler struct {
	ledger  entrySubmitter
	metrics *Metrics
	// release answers parked requests whose actions were decided.
	release *releaser
	// parkMem returns the memory of a burst of arrivals once parked.
	parkMem parkMemory
	// keys authenticates a waiting request's key again before its released
	// intent is applied: a key revoked meanwhile starts nothing.
	keys authenticator
	// writeTimeout is given again to a request that waited in await, whose
	// wait may outlast the server's write deadline.
	writeTimeout time.Duration
	// waits counts the requests waiting now, parked or not; beyond
	// maxWaiters a request is answered at once. maxWaiters 0 is
	// DefaultMaxWaiters, negative lets no request wait.
	waits      atomic.Int64
	maxWaiters int64
}

// DefaultMaxWaiters is how many requests may wait (Prefer: wait) at once
// when ARBITER_MAX_WAITERS is not set.
const DefaultMaxWaiters = 10000

// enterWait counts one more waiting request, or reports false when
// maxWaiters already wait.
func (h *entriesHandler) enterWait() bool {
	max := h.maxWaiters
	if max == 0 {
		max = DefaultMaxWaiters
	}
	if max < 0 {
		return false
	}
	if h.waits.Add(1) > max {
		h.waits.Add(-1)
		return false
	}
	return true
}

// outcomeStatus is the HTTP status of a single-entry answer by outcome.
var outcomeStatus = map[record.Outcome]int{
	record.OutcomeProceed:    http.StatusCreated,
	record.OutcomeReplay:     http.StatusOK,
	record.OutcomeInProgress: http.StatusConflict,
	record.OutcomeHeld:       http.StatusConflict,
	record.OutcomeCompensate: http.StatusOK,
	record.OutcomeRecorded:   http.StatusOK,
	record.OutcomeDuplicate:  http.StatusOK,
	// Held for approval: accepted, not run.
	record.OutcomePendingApproval: http.StatusAccepted,
	record.OutcomeDenied:          http.StatusConflict,
	// Held back by a freeze: ask again after Retry-After.
	record.OutcomeFrozen: http.StatusConflict,
}

type batchResponse struct {
	Results []services.EntryResult `json:"results"`
}

func (h *entriesHandler) submit(c echo.Context) error {
	body, err := readBody(c)
	if err != nil {
		return err
	}
	raws, batch, err := splitEntries(body)
	if err != nil {
		return err
	}
	results, err := h.ledger.Submit(c.Request().Context(), principal(c), raws)
	for _, r := range results {
		h.metrics.ObserveEntry(r.Type, r.Outcome)
	}
	if err != nil {
		return err
	}
	if batch {
		if c.QueryParams().Has("pretty") {
			return c.JSON(http.StatusOK, batchResponse{Results: results})
		}
		b := make([]byte, 0, 512*len(results))
		b = append(b, `{"results":[`...)
		for i := range results {
			if i > 0 {
				b = append(b, ',')
			}
			b = results[i].AppendJSON(b)
		}
		return c.JSONBlob(http.StatusOK, append(b, "]}\n"...))
	}
	r := results[0]
	if wait, ok := preferWait(c.Request().Header.Values("Prefer")); ok && wait > 0 && r.Outcome == record.OutcomePendingApproval && h.enterWait() {
		c.Response().Header().Set("Preference-Applied", fmt.Sprintf("wait=%d", int(wait.Seconds())))
		if h.park(c, r, raws, wait) {
			return nil
		}
		r, err = h.await(c, r, raws, wait)
		h.waits.Add(-1)
		writeWithin(c.Response(), cmp.Or(h.writeTimeout, DefaultWriteTimeout))
		if err != nil {
			return err
		}
	}
	if r.Outcome == record.OutcomeFrozen {
		c.Response().Header().Set("Retry-After", strconv.Itoa(int(services.FrozenRetryAfter.Seconds())))
	}
	if c.QueryParams().Has("pretty") {
		return c.JSON(resultStatus(r), r)
	}
	return c.JSONBlob(resultStatus(r), append(r.AppendJSON(make([]byte, 0, 512)), '\n'))
}

// resultStatus is the HTTP status of a single entry's answer.
func resultStatus(r services.EntryResult) int {
	status := outcomeStatus[r.Outcome]
	if r.Outcome == record.OutcomeProceed && r.Type == record.TypeLookup {
		status = http.StatusOK // a lookup creates nothing: it may ask the downstream now
	}
	if r.Error != nil {
		status, _ = toAPIError(r.Error)
	}
	return status
}

// park holds a single intent that is pending approval without holding its
// request: the connection is taken from net/http (HTTP/1.x only), the
// handler returns, and the ledger calls back once the action is approved or
// denied, or wait passes; the answer is then written to the connection,
// which closes. A waiting request so costs its connection, a timer, a
// small goroutine blocked reading the connection and a few small records,
// not net/http's buffers: ten thousand waiters fit in a small process. It
// reports false when the connection cannot be taken; the request then
// waits in await.
//
// The reading goroutine notices a hang-up at once: the connection is
// closed and the wait ended, so a client that left holds no descriptor.
// Only an answered proceed starts an attempt: before a released intent is
// applied, the client must still be there and its key still valid; if not,
// nothing is applied and the action stays approved for the next intent.
// What remains is a client that hangs up between that check and the
// answer's write (the time of one release write), and one whose host
// vanished without closing the connection.
//
// The request's log line and latency are those of the request until it
// was parked (status 202); the entry's final outcome is counted in the
// entries metric when it is answered.
func (h *entriesHandler) park(c echo.Context, r services.EntryResult, raws [][]byte, wait time.Duration) bool {
	req := c.Request()
	hj, ok := c.Response().Writer.(http.Hijacker)
	if req.ProtoMajor != 1 || !ok {
		return false
	}
	header := c.Response().Header().Clone()
	conn, _, err := hj.Hijack()
	if err != nil {
		return false
	}
	// Nothing more is read from the connection but its end (the answer
	// closes it), so net/http's buffers are dropped with the request.
	conn.SetDeadline(time.Time{})
	c.Response().Status = http.StatusAccepted
	p := principal(c)
	_, secret, _ := strings.Cut(req.Header.Get("Authorization"), " ")
	secret = strings.TrimSpace(secret)
	h.parkMem.noteParked()
	var (
		gone     = make(chan struct{})
		answered atomic.Bool // done began: the reader no longer ends the wait
		once     sync.Once
	)
	leave := func() {
		once.Do(func() {
			conn.Close()
			h.waits.Add(-1)
		})
	}
	stop := h.ledger.AwaitDecisionFunc(p, r.Action.ID, wait, func(a *record.Action, err error) {
		answered.Store(true)
		defer leave()
		select {
		case <-gone:
			return // the client left: nothing is applied for it
		default:
		}
		var (
			status     = resultStatus(r)
			body   any = r
		)
		if err == nil && a != nil && a.Status != record.StatusAwaitingApproval {
			res, err := h.released(p, secret, gone, r.Action.ID, raws[0])
			if errors.Is(err, errClientGone) {
				return
			}
			if err != nil {
				var e *services.Error
				status, e = toAPIError(err)
				body = errorBody{Error: e}
				if status == http.StatusServiceUnavailable {
					header.Set("Retry-After", "1")
				}
			} else {
				h.metrics.ObserveEntry(res.Type, res.Outcome)
				status, body = resultStatus(res), res
			}
		}
		writeParked(conn, header, status, body)
	})
	go func() {
		// A client sends nothing more after its request; any read that ends
		// is its hang-up (or the answer's close).
		buf := make([]byte, 1)
		for {
			if _, err := conn.Read(buf); err != nil {
				break
			}
		}
		close(gone)
		if !answered.Load() {
			stop()
			leave()
		}
	}()
	return true
}

var errClientGone = errors.New("waiting client left")

// released applies a released intent for a waiting client that is still
// there and whose key is still valid.
func (h *entriesHandler) released(p services.Principal, secret string, gone <-chan struct{}, id string, raw []byte) (services.EntryResult, error) {
	if h.keys != nil {
		if _, err := h.keys.Authenticate(context.Background(), secret); err != nil {
			return services.EntryResult{}, err
		}
	}
	select {
	case <-gone:
		return services.EntryResult{}, errClientGone
	default:
	}
	return h.release.submit(p, id, raw)
}

// writeParked writes a parked request's answer, as c.JSON would, and asks
// the client to close the connection.
func writeParked(conn net.Conn, header http.Header, status int, body any) {
	b, err := json.Marshal(body)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":{"code":"internal","message":"internal error"}}`)
	}
	b = append(b, '\n')
	header.Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
	header.Set("Date", time.Now().UTC().Format(http.TimeFormat))
	res := &http.Response{StatusCode: status, ProtoMajor: 1, ProtoMinor: 1, Header: header, Close: true,
		ContentLength: int64(len(b)), Body: io.NopCloser(bytes.NewReader(b))}
	conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
	bw := bufio.NewWriterSize(conn, 1024)
	if res.Write(bw) == nil {
		bw.Flush()
	}
}

// await holds a single intent that is pending approval until the action is
// approved or denied, or wait passes, and then answers the intent again:
// proceed once approved, denied once denied, pending_approval still. It is
// the wait of HTTP/2 requests, which cannot be parked; as for a parked one,
// only an answered proceed starts an attempt: the client must still be
// there and its key still valid before the intent is applied again.
func (h *entriesHandler) await(c echo.Context, r services.EntryResult, raws [][]byte, wait time.Duration) (services.EntryResult, error) {
	req := c.Request()
	ctx, cancel := context.WithTimeout(req.Context(), wait)
	defer cancel()
	p := principal(c)
	a, err := h.ledger.AwaitDecision(ctx, p, r.Action.ID)
	if err != nil || a.Status == record.StatusAwaitingApproval || req.Context().Err() != nil {
		return r, nil // the client went away, or nobody decided in time
	}
	if h.keys != nil {
		_, secret, _ := strings.Cut(req.Header.Get("Authorization"), " ")
		if _, err := h.keys.Authenticate(req.Context(), strings.TrimSpace(secret)); err != nil {
			return r, err // revoked while it waited: nothing is applied
		}
	}
	results, err := h.ledger.Submit(req.Context(), p, raws)
	if err != nil {
		return r, err
	}
	for _, res := range results {
		h.metrics.ObserveEntry(res.Type, res.Outcome)
	}
	return results[0], nil
}

// preferWait reads wait=N from Prefer headers (RFC 7240), clamped to
// MaxWait; a malformed preference is ignored, as the RFC asks.
func preferWait(values []string) (time.Duration, bool) {
	for _, v := range values {
		for _, pref := range strings.Split(v, ",") {
			name, val, ok := strings.Cut(strings.TrimSpace(pref), "=")
			if !ok || !strings.EqualFold(strings.TrimSpace(name), "wait") {
				continue
			}
			// delta-seconds: digits only. However many, a value beyond
			// MaxWait waits MaxWait; converted first, a value past int64
			// or past a Duration's seconds overflowed to no wait.
			digits := strings.Trim(strings.TrimSpace(val), `"`)
			if digits == "" || strings.Trim(digits, "0123456789") != "" {
				continue
			}
			n, err := strconv.ParseUint(digits, 10, 64)
			if err != nil || n > uint64(MaxWait/time.Second) {
				return MaxWait, true
			}
			return time.Duration(n) * time.Second, true
		}
	}
	return 0, false
}

// readBody reads the whole body, up to MaxBodyBytes.
func readBody(c echo.Context) ([]byte, error) {
	r := http.MaxBytesReader(c.Response().Writer, c.Request().Body, MaxBodyBytes)
	body, err := io.ReadAll(r)
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return nil, services.Errorf(services.CodeBodyTooLarge, "the request body is over %d bytes; send fewer entries per request", MaxBodyBytes)
	}
	if err != nil {
		return nil, services.Errorf(services.CodeInvalid, "reading the request body: %v", err)
	}
	return body, nil
}

// splitEntries tells a single entry from a batch ({"entries": [...]}) and
// returns the raw entries. Entries are decoded one by one by the ledger, so a
// bad entry in a batch is rejected on its own.
//
// Once the body is known to be valid JSON, its top level and the entries
// array are walked by scanning bytes (jsonscan.go), and the entries are
// slices of the body: decoding the batch into a map and an array of raw
// messages first validated and copied it twice more, which was a tenth of
// the server's time for a 100-entry batch.
func splitEntries(body []byte) (raws [][]byte, batch bool, err error) {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		return nil, false, services.Errorf(services.CodeInvalidJSON, "empty body: send an entry object or {\"entries\": [...]}")
	}
	if trimmed[0] != '{' {
		return nil, false, services.Errorf(services.CodeInvalidJSON, "the body must be a JSON object: an entry or {\"entries\": [...]}")
	}
	if !json.Valid(trimmed) {
		var v any
		return nil, false, services.DescribeJSONError(json.Unmarshal(trimmed, &v))
	}
	var list []byte
	var other string
	var hasOther bool // the empty name is a name too
	for name, value := range members(trimmed) {
		if name == "entries" {
			list = value // the last one wins, as when decoding into a map
		} else if !hasOther {
			other, hasOther = name, true
		}
	}
	if list == nil {
		return [][]byte{trimmed}, false, nil
	}
	if hasOther {
		return nil, true, services.Errorf(services.CodeInvalid, "unknown field %q beside \"entries\"", other)
	}
	switch list[0] {
	case '[':
		raws = slices.Collect(elements(list))
	case 'n': // null decodes as an empty list
	default:
		return nil, true, services.Errorf(services.CodeInvalid, "field \"entries\" must be an array of entry objects")
	}
	switch {
	case len(raws) == 0:
		return nil, true, services.Errorf(services.CodeInvalid, "field \"entries\" must hold 1 to %d entries", services.MaxBatchEntries)
	case len(raws) > services.MaxBatchEntries:
		return nil, true, services.Errorf(services.CodeTooManyEntries, "%d entries in one request; the limit is %d", len(raws), services.MaxBatchEntries)
	}
	return raws, true, nil
}
