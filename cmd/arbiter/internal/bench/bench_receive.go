package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// receiveReport describes the webhook deliveries a --receive run saw.
type receiveReport struct {
	Received   int     `json:"received"`
	Unique     int     `json:"unique"`
	Duplicates int     `json:"duplicates"`
	Seconds    float64 `json:"seconds"` // first delivery to last
	PerSecond  float64 `json:"deliveries_per_second"`
	// Latency runs from the alert's timestamp (the ledger change that
	// caused it) to its arrival here.
	Latency latency `json:"latency_from_commit_ms"`
}

// receiver is a webhook endpoint that answers 204 at once and remembers
// every message id, so that a run can tell lost and duplicated deliveries.
type receiver struct {
	mu          sync.Mutex
	seen        map[string]int
	lat         []time.Duration
	first, last time.Time
	arrived     chan struct{}
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	now := time.Now()
	body, err := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	var msg struct {
		Timestamp time.Time `json:"timestamp"`
	}
	if err != nil || json.Unmarshal(body, &msg) != nil || req.Header.Get("webhook-id") == "" {
		http.Error(w, "not a standard webhook", http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	r.seen[req.Header.Get("webhook-id")]++
	r.lat = append(r.lat, now.Sub(msg.Timestamp))
	if r.first.IsZero() {
		r.first = now
	}
	r.last = now
	r.mu.Unlock()
	select {
	case r.arrived <- struct{}{}:
	default:
	}
	w.WriteHeader(http.StatusNoContent)
}

// runReceive listens on addr until want distinct messages arrived (0: no
// such goal) and nothing more arrives for idle, or until the whole duration
// passed.
func (b *Cmd) runReceive(ctx context.Context) (*receiveReport, error) {
	ln, err := net.Listen("tcp", b.Receive)
	if err != nil {
		return nil, err
	}
	r := &receiver{seen: map[string]int{}, arrived: make(chan struct{}, 1)}
	srv := &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()
	deadline := time.After(b.Duration)
	idle := time.NewTimer(b.Idle)
	started := false
wait:
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-deadline:
			break wait
		case <-r.arrived:
			started = true
			idle.Reset(b.Idle)
		case <-idle.C:
			r.mu.Lock()
			enough := b.Expect == 0 || len(r.seen) >= b.Expect
			r.mu.Unlock()
			if started && enough {
				break wait
			}
			idle.Reset(b.Idle)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	rep := &receiveReport{Received: len(r.lat), Unique: len(r.seen), Latency: summarize(r.lat)}
	for _, n := range r.seen {
		rep.Duplicates += n - 1
	}
	if rep.Received > 1 {
		rep.Seconds = r.last.Sub(r.first).Seconds()
		rep.PerSecond = float64(rep.Received-1) / rep.Seconds
	}
	if b.Expect > 0 && rep.Unique != b.Expect {
		return rep, fmt.Errorf("bench: received %d distinct messages, expected %d", rep.Unique, b.Expect)
	}
	if rep.Received == 0 {
		return rep, errors.New("bench: no webhook arrived")
	}
	return rep, nil
}
