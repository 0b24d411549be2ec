// Package webhookstest helps tests that send webhook alerts and look at what
// arrived: a receiver that records requests and answers as told, a
// dispatcher that polls fast, endpoints made in one call, and the checks of
// a received message (its Standard Webhooks signature, its body). The
// webhook suite (services/webhooks) and the ledger's alert tests
// (services) both use it.
package webhookstest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/record"
	"github.com/arbiter-ledger/arbiter/services/webhooks"
)

// Reply is one answer of a receiver.
type Reply struct {
	Status int
	Header map[string]string
	Body   string // default "reply <n>", n counting requests from 1
}

// Received is one request a receiver got.
type Received struct {
	Header http.Header
	Body   []byte
}

// Receiver records what it is sent and answers with its replies in order,
// then with its fallback. URL is where it listens.
type Receiver struct {
	URL string

	mu       sync.Mutex
	replies  []Reply
	fallback Reply
	requests []Received
}

// NewReceiver answers with the given statuses, then 200, until the test
// ends.
func NewReceiver(t testing.TB, statuses ...int) *Receiver {
	rs := make([]Reply, len(statuses))
	for i, s := range statuses {
		rs[i] = Reply{Status: s}
	}
	return NewReceiverWith(t, Reply{Status: 200}, rs...)
}

// NewReceiverWith answers with replies, then with fallback.
func NewReceiverWith(t testing.TB, fallback Reply, replies ...Reply) *Receiver {
	r := &Receiver{replies: replies, fallback: fallback}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.requests = append(r.requests, Received{req.Header.Clone(), body})
		n := len(r.requests)
		rep := r.fallback
		if len(r.replies) > 0 {
			rep, r.replies = r.replies[0], r.replies[1:]
		}
		r.mu.Unlock()
		for k, v := range rep.Header {
			w.Header().Set(k, v)
		}
		w.WriteHeader(rep.Status)
		if rep.Body == "" {
			rep.Body = fmt.Sprintf("reply %d", n)
		}
		io.WriteString(w, rep.Body)
	}))
	t.Cleanup(srv.Close)
	r.URL = srv.URL
	return r
}

// Got returns the requests so far, oldest first.
func (r *Receiver) Got() []Received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Received(nil), r.requests...)
}

// SetFallback changes how the receiver answers once its replies are used.
func (r *Receiver) SetFallback(rep Reply) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fallback = rep
}

// WaitRequests waits until the receiver got n requests and returns them.
func (r *Receiver) WaitRequests(t testing.TB, n int) []Received {
	t.Helper()
	require.Eventually(t, func() bool { return len(r.Got()) >= n }, 10*time.Second, 5*time.Millisecond,
		"the receiver got %d requests, want %d", len(r.Got()), n)
	return r.Got()
}

// Admin is an admin key's principal, for managing endpoints.
func Admin() services.Principal {
	return services.Principal{Kind: "api_key", ID: "admin", Name: "root", Role: services.RoleAdmin}
}

// EndpointOpts describes an endpoint to create.
type EndpointOpts struct {
	URL        string             // required
	Events     []record.EventType // default: action.timed_out
	Namespaces []string           // default: every namespace
	Format     string             // default: standard
}

// Endpoint creates an endpoint with hooks.
func Endpoint(t testing.TB, hooks *webhooks.Webhooks, o EndpointOpts) *webhooks.Endpoint {
	t.Helper()
	if o.Events == nil {
		o.Events = []record.EventType{record.EventTimedOut}
	}
	in := webhooks.EndpointInput{URL: &o.URL, EventTypes: &o.Events}
	if o.Namespaces != nil {
		in.Namespaces = &o.Namespaces
	}
	if o.Format != "" {
		in.Format = &o.Format
	}
	ep, err := hooks.CreateEndpoint(context.Background(), Admin(), in)
	require.NoError(t, err)
	return ep
}

// Deliveries lists an endpoint's deliveries, newest first.
func Deliveries(t testing.TB, hooks *webhooks.Webhooks, endpointID string) []*webhooks.Delivery {
	t.Helper()
	ds, err := hooks.EndpointDeliveries(context.Background(), Admin(), endpointID, 100)
	require.NoError(t, err)
	return ds
}

// WaitDelivery waits until the endpoint's newest delivery satisfies ok and
// returns it.
func WaitDelivery(t testing.TB, hooks *webhooks.Webhooks, endpointID string, ok func(d *webhooks.Delivery) bool) *webhooks.Delivery {
	t.Helper()
	var last *webhooks.Delivery
	require.Eventually(t, func() bool {
		ds := Deliveries(t, hooks, endpointID)
		if len(ds) == 0 {
			return false
		}
		last = ds[0]
		return ok(last)
	}, 10*time.Second, 5*time.Millisecond, "delivery never got there; last seen: %+v", last)
	return last
}

// DispatcherOpts configures a dispatcher under test.
type DispatcherOpts struct {
	Policy       *webhooks.AddressPolicy // default: private addresses allowed
	Schedule     []time.Duration         // default: webhooks.RetrySchedule
	DisableAfter time.Duration           // default: 5 days
	PublicURL    string
}

// StartDispatcher runs a dispatcher until the test ends. It polls every
// 10 ms, since nothing wakes it in tests.
func StartDispatcher(t testing.TB, st *services.Store, o DispatcherOpts) *webhooks.Dispatcher {
	t.Helper()
	policy := webhooks.AddressPolicy{AllowPrivate: true}
	if o.Policy != nil {
		policy = *o.Policy
	}
	d := webhooks.NewDispatcher(st, slog.New(slog.DiscardHandler), webhooks.DispatcherConfig{Policy: policy,
		Poll: 10 * time.Millisecond, PublicURL: o.PublicURL, RetrySchedule: o.Schedule, DisableAfter: o.DisableAfter})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { d.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return d
}

// Fast is a retry schedule of the real length in milliseconds.
var Fast = []time.Duration{10 * time.Millisecond, 10 * time.Millisecond, 10 * time.Millisecond,
	10 * time.Millisecond, 10 * time.Millisecond, 10 * time.Millisecond, 10 * time.Millisecond}

// Verify checks a received message's signature with the Standard Webhooks
// library, an oracle independent of the package's own signing.
func Verify(secret string, r Received) error {
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		return err
	}
	return wh.Verify(r.Body, r.Header)
}

// MessageOf decodes a received message's body.
func MessageOf(t testing.TB, r Received) services.MessageBody {
	t.Helper()
	var m services.MessageBody
	require.NoError(t, json.Unmarshal(r.Body, &m), "%s", r.Body)
	return m
}

// RequireCode fails the test unless err is a coded error with code.
func RequireCode(t testing.TB, code string, err error, what ...any) {
	t.Helper()
	require.Error(t, err, what...)
	e, ok := services.AsError(err)
	require.True(t, ok, "a coded error, got %v", err)
	require.Equal(t, code, e.Code, "%s (%v)", e.Message, what)
}
