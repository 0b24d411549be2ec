package web

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/arbiter-ledger/arbiter/services"
)

const (
	// triagePollEvery is how often the shared poller reads the stamp: new
	// items reach open pages within about a second.
	triagePollEvery = time.Second
	// heartbeatEvery keeps idle streams open through proxies.
	heartbeatEvery = 15 * time.Second
	// streamLifetime ends each stream after a while, so long-lived proxies
	// and sessions are re-checked; the browser reconnects by itself, sending
	// the last stamp it saw. Shutdown ends streams at once through
	// Deps.Done: http.Server.Shutdown does not cancel open requests.
	streamLifetime = 10 * time.Minute
	// reconnectAfter is how soon the browser reconnects after a stream ends.
	reconnectAfter = time.Second
	// sessionCheckEvery is how often an open stream checks that its session
	// is still live: a stream ends within this long of a sign-out, the
	// session expiring or the user being disabled.
	sessionCheckEvery = 2 * time.Second
)

// triageFeed tells open triage pages when the queue changed. One poller per
// server reads the stamp while anyone listens, so the database sees one
// cheap query a second however many pages are open; it stops when the last
// page goes away and starts again with the next.
type triageFeed struct {
	read     func(context.Context) (string, error)
	log      *slog.Logger
	interval time.Duration

	mu    sync.Mutex
	subs  map[chan struct{}]struct{}
	stamp string             // the last stamp read; empty until the poller's first read
	stop  context.CancelFunc // nil while nobody listens
}

func newTriageFeed(read func(context.Context) (string, error), log *slog.Logger) *triageFeed {
	return &triageFeed{read: read, log: log, interval: triagePollEvery, subs: map[chan struct{}]struct{}{}}
}

// join returns a channel that receives a value whenever the stamp may have
// changed (and at once if a stamp is known), and the function to leave.
func (f *triageFeed) join() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.subs[ch] = struct{}{}
	switch {
	case f.stop == nil:
		ctx, cancel := context.WithCancel(context.Background())
		f.stop = cancel
		go f.poll(ctx)
	case f.stamp != "":
		ch <- struct{}{}
	}
	return ch, func() { f.leave(ch) }
}

func (f *triageFeed) leave(ch chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.subs, ch)
	if len(f.subs) == 0 && f.stop != nil {
		f.stop()
		f.stop, f.stamp = nil, ""
	}
}

// latest is the last stamp read, or "" before the first read.
func (f *triageFeed) latest() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stamp
}

func (f *triageFeed) poll(ctx context.Context) {
	t := time.NewTicker(f.interval)
	defer t.Stop()
	failing := false
	for {
		s, err := f.read(ctx)
		switch {
		case err != nil && ctx.Err() == nil && !failing:
			f.log.Warn("triage: live updates cannot read the queue; retrying", "err", err)
			failing = true
		case err == nil:
			failing = false
			f.publish(ctx, s)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (f *triageFeed) publish(ctx context.Context, s string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	// A poller stopped while it read must not overwrite a newer one's state.
	if ctx.Err() != nil || s == f.stamp {
		return
	}
	f.stamp = s
	for ch := range f.subs {
		select {
		case ch <- struct{}{}:
		default: // already woken; it reads the latest stamp anyway
		}
	}
}

// events is the live update stream of the triage page: `event: triage`
// whenever the queue changed since the stamp the page (or, on a reconnect,
// the last event) carried. Each event's id is the new stamp, which the
// browser sends back as Last-Event-ID when it reconnects.
func (h *triagePages) events(c echo.Context) error {
	seen := c.Request().Header.Get("Last-Event-ID")
	if seen == "" {
		seen = c.QueryParam("stamp")
	}
	w := c.Response()
	w.Header().Set(echo.HeaderContentType, "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprintf(w, "retry: %d\n\n", reconnectAfter.Milliseconds())
	writeWithin(w, h.writeTimeout)
	w.Flush()

	wake, leave := h.feed.join()
	defer leave()
	heartbeat := time.NewTicker(heartbeatEvery)
	defer heartbeat.Stop()
	end := time.NewTimer(streamLifetime)
	defer end.Stop()
	recheck := time.NewTicker(h.sessionCheckEvery)
	defer recheck.Stop()
	token := h.cookies.get(c, sessionCookie)
	p := principal(c)
	told := false // whether this stream has given the browser an id yet
	for {
		var err error
		select {
		case <-c.Request().Context().Done():
			return nil
		case <-h.done:
			return nil
		case <-end.C:
			return nil
		case <-recheck.C:
			// Any failure ends the stream; the browser's reconnect is
			// answered as a fresh request would be.
			s, err := h.sessions.Session(c.Request().Context(), token)
			if err != nil {
				return nil
			}
			p = s.Principal() // memberships may have changed
			continue
		case <-heartbeat.C:
			_, err = fmt.Fprint(w, ": keep-alive\n\n")
		case <-wake:
			cur, serr := h.stampFor(c.Request().Context(), p)
			if serr != nil {
				return nil // the browser reconnects
			}
			switch {
			case cur == "":
				continue
			case cur != seen:
				_, err = fmt.Fprintf(w, "id: %s\nevent: triage\ndata: changed\n\n", cur)
			case !told:
				// An id alone dispatches no event but is what the browser
				// sends back on reconnect.
				_, err = fmt.Fprintf(w, "id: %s\n\n", cur)
			default:
				continue
			}
			seen, told = cur, true
		}
		if err != nil {
			return nil // the browser went away
		}
		writeWithin(w, h.writeTimeout)
		w.Flush()
	}
}

// stampFor is the stamp of the queue p sees. The shared poller watches every
// namespace; a person who sees only some is told of a change only when the
// queue of their namespaces changed, read when the shared stamp moves.
func (h *triagePages) stampFor(ctx context.Context, p services.Principal) (string, error) {
	cur := h.feed.latest()
	if cur == "" || p.Global() {
		return cur, nil
	}
	return h.ledger.TriageStamp(ctx, p)
}
