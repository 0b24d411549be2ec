package services_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/arbiter-ledger/arbiter/services/webhooks"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
	"github.com/arbiter-ledger/arbiter/services/record"
)

// The webhook suite: delivery, signatures, retries and endpoint health, on
// both databases. Signatures are checked with the official Standard Webhooks
// library, an oracle independent of services/signing.go. The outbox's
// atomicity and the alert events are in webhook_outbox_test.go, address
// checks in webhook_ssrf_test.go.

// reply is one answer of a receiver.
type reply struct {
	status int
	header map[string]string
	body   string // default "reply <n>", n counting requests from 1
}

// receiver records what it is sent and answers with its replies in order,
// then with fallback.
type receiver struct {
	mu       sync.Mutex
	srv      *httptest.Server
	replies  []reply
	fallback reply
	requests []received
}

type received struct {
	header http.Header
	body   []byte
}

// newReceiver answers with the given statuses, then 200.
func newReceiver(t *testing.T, statuses ...int) *receiver {
	rs := make([]reply, len(statuses))
	for i, s := range statuses {
		rs[i] = reply{status: s}
	}
	return newReceiverWith(t, reply{status: 200}, rs...)
}

// newReceiverWith answers with replies, then with fallback.
func newReceiverWith(t *testing.T, fallback reply, replies ...reply) *receiver {
	r := &receiver{replies: replies, fallback: fallback}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.requests = append(r.requests, received{req.Header.Clone(), body})
		n := len(r.requests)
		rep := r.fallback
		if len(r.replies) > 0 {
			rep, r.replies = r.replies[0], r.replies[1:]
		}
		r.mu.Unlock()
		for k, v := range rep.header {
			w.Header().Set(k, v)
		}
		w.WriteHeader(rep.status)
		if rep.body == "" {
			rep.body = fmt.Sprintf("reply %d", n)
		}
		io.WriteString(w, rep.body)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) got() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.requests...)
}

// setFallback changes how the receiver answers once its replies are used.
func (r *receiver) setFallback(rep reply) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fallback = rep
}

// waitRequests waits until the receiver got n requests and returns them.
func (r *receiver) waitRequests(t *testing.T, n int) []received {
	t.Helper()
	require.Eventually(t, func() bool { return len(r.got()) >= n }, 10*time.Second, 5*time.Millisecond,
		"the receiver got %d requests, want %d", len(r.got()), n)
	return r.got()
}

func admin() services.Principal {
	return services.Principal{Kind: "api_key", ID: "admin", Name: "root", Role: services.RoleAdmin}
}

// hookEnv is a fixture with the webhook service beside its ledger.
type hookEnv struct {
	*fixture
	hooks *webhooks.Webhooks
}

func newHookEnv(t *testing.T, st *services.Store) *hookEnv {
	t.Helper()
	return &hookEnv{fixture: newFixture(t, st, FixtureOpts{}),
		hooks: webhooks.New(st, webhooks.AddressPolicy{AllowPrivate: true})}
}

// EndpointOpts describes an endpoint to create.
type EndpointOpts struct {
	URL        string             // required
	Events     []record.EventType // default: action.timed_out
	Namespaces []string           // default: every namespace
	Format     string             // default: standard
}

func (e *hookEnv) endpoint(t *testing.T, o EndpointOpts) *webhooks.Endpoint {
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
	ep, err := e.hooks.CreateEndpoint(context.Background(), admin(), in)
	require.NoError(t, err)
	return ep
}

// timeOut records an intent for key with a one-second lease, lets it pass
// and sweeps, which alerts action.timed_out.
func (e *hookEnv) timeOut(t *testing.T, key string) *record.Action {
	t.Helper()
	res := submit(t, e.l, e.agent, intent(IntentOpts{Key: key, Timeout: 1}))
	require.Equal(t, record.OutcomeProceed, res.Outcome)
	e.clock.Advance(2 * time.Second)
	_, err := e.l.Sweep(context.Background())
	require.NoError(t, err)
	a, err := e.l.ActionByKey(context.Background(), e.agent, "", key)
	require.NoError(t, err)
	require.Equal(t, record.StatusTimedOut, a.Status)
	return a
}

// deliveries lists an endpoint's deliveries, newest first.
func (e *hookEnv) deliveries(t *testing.T, endpointID string) []*webhooks.Delivery {
	t.Helper()
	ds, err := e.hooks.EndpointDeliveries(context.Background(), admin(), endpointID, 100)
	require.NoError(t, err)
	return ds
}

// waitDelivery waits until the endpoint's newest delivery satisfies ok.
func (e *hookEnv) waitDelivery(t *testing.T, endpointID string, ok func(d *webhooks.Delivery) bool) *webhooks.Delivery {
	t.Helper()
	var last *webhooks.Delivery
	require.Eventually(t, func() bool {
		ds := e.deliveries(t, endpointID)
		if len(ds) == 0 {
			return false
		}
		last = ds[0]
		return ok(last)
	}, 10*time.Second, 5*time.Millisecond, "delivery never got there; last seen: %+v", last)
	return last
}

func (e *hookEnv) getEndpoint(t *testing.T, id string) *webhooks.Endpoint {
	t.Helper()
	ep, err := e.hooks.Endpoint(context.Background(), admin(), id)
	require.NoError(t, err)
	return ep
}

// DispatcherOpts configures a dispatcher under test.
type DispatcherOpts struct {
	Policy       *webhooks.AddressPolicy // default: private addresses allowed
	Schedule     []time.Duration         // default: webhooks.RetrySchedule
	DisableAfter time.Duration           // default: 5 days
	PublicURL    string
}

// startDispatcher runs a dispatcher until the test ends. It polls every
// 10 ms, since nothing wakes it in these tests.
func startDispatcher(t *testing.T, st *services.Store, o DispatcherOpts) *webhooks.Dispatcher {
	t.Helper()
	policy := webhooks.AddressPolicy{AllowPrivate: true}
	if o.Policy != nil {
		policy = *o.Policy
	}
	d := webhooks.NewDispatcher(st, slog.New(slog.DiscardHandler), policy)
	d.Poll = 10 * time.Millisecond
	d.PublicURL = o.PublicURL
	if o.Schedule != nil {
		d.SetRetrySchedule(o.Schedule)
	}
	if o.DisableAfter > 0 {
		d.DisableAfter = o.DisableAfter
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { d.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return d
}

// fast is a retry schedule of the real length in milliseconds.
var fast = []time.Duration{10 * time.Millisecond, 10 * time.Millisecond, 10 * time.Millisecond,
	10 * time.Millisecond, 10 * time.Millisecond, 10 * time.Millisecond, 10 * time.Millisecond}

// verify checks a received message with the Standard Webhooks library.
func verify(secret string, r received) error {
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		return err
	}
	return wh.Verify(r.body, r.header)
}

func messageOf(t *testing.T, r received) services.MessageBody {
	t.Helper()
	var m services.MessageBody
	require.NoError(t, json.Unmarshal(r.body, &m), "%s", r.body)
	return m
}

// TestTimedOutActionIsDelivered: the sweeper's change writes an alert in
// its own transaction, and the dispatcher delivers it signed.
func TestTimedOutActionIsDelivered(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		ctx := context.Background()
		rcv := newReceiver(t)
		hooks := webhooks.New(st, webhooks.AddressPolicy{AllowPrivate: true})
		ep, err := hooks.CreateEndpoint(ctx, admin(), webhooks.EndpointInput{URL: &rcv.srv.URL, EventTypes: &[]record.EventType{record.EventTimedOut}})
		require.NoError(t, err)
		require.Regexp(t, `^whsec_`, ep.Secret)

		f := newFixture(t, st, FixtureOpts{})
		submit(t, f.l, f.agent, intent(IntentOpts{Key: "k", Timeout: 1}))
		f.clock.Advance(2 * time.Second)
		n, err := f.l.Sweep(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, n)

		d := webhooks.NewDispatcher(st, slog.New(slog.DiscardHandler), webhooks.AddressPolicy{AllowPrivate: true})
		dctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { d.Run(dctx); close(done) }()
		require.Eventually(t, func() bool { return len(rcv.got()) == 1 }, 5*time.Second, 10*time.Millisecond)
		cancel()
		<-done

		req := rcv.got()[0]
		wh, err := standardwebhooks.NewWebhook(ep.Secret)
		require.NoError(t, err)
		require.NoError(t, wh.Verify(req.body, req.header), "the Standard Webhooks library accepts the signature")
		var body services.MessageBody
		require.NoError(t, json.Unmarshal(req.body, &body))
		require.Equal(t, record.EventTimedOut, body.Type)
		require.Equal(t, record.StatusTimedOut, body.Data.Action.Status)
		require.Equal(t, record.TypeTimedOut, body.Data.Entry.Type)
		require.Equal(t, 2, body.Data.Entry.Seq, "the entry's seq is the one the ledger assigned")
		require.Equal(t, "application/json", req.header.Get("Content-Type"))

		ds, err := hooks.EndpointDeliveries(ctx, admin(), ep.ID, 10)
		require.NoError(t, err)
		require.Len(t, ds, 1)
		require.Equal(t, webhooks.DeliverySucceeded, ds[0].State)
		require.Equal(t, req.header.Get("webhook-id"), ds[0].WebhookID)
		require.Len(t, ds[0].Attempts, 1)
		require.Equal(t, 200, *ds[0].Attempts[0].StatusCode)
	})
}

// TestSignaturesDuringSecretRotation: after a rotation both secrets sign for
// 24 hours, and the library accepts the message with either; once the
// overlap is over only the new secret signs.
func TestSignaturesDuringSecretRotation(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		ctx := context.Background()
		e := newHookEnv(t, st)
		rcv := newReceiver(t)
		ep := e.endpoint(t, EndpointOpts{URL: rcv.srv.URL})
		startDispatcher(t, st, DispatcherOpts{})

		_, err := e.hooks.SendTest(ctx, admin(), ep.ID)
		require.NoError(t, err)
		before := rcv.waitRequests(t, 1)[0]
		require.Len(t, strings.Fields(before.header.Get("webhook-signature")), 1)
		require.NoError(t, verify(ep.Secret, before))

		rotated, err := e.hooks.RotateSecret(ctx, admin(), ep.ID)
		require.NoError(t, err)
		require.Regexp(t, `^whsec_[A-Za-z0-9+/]{43}=$`, rotated.Secret, "32 random bytes")
		require.NotEqual(t, ep.Secret, rotated.Secret)
		require.Empty(t, e.getEndpoint(t, ep.ID).Secret, "the secret is shown only at creation and rotation")

		_, err = e.hooks.SendTest(ctx, admin(), ep.ID)
		require.NoError(t, err)
		during := rcv.waitRequests(t, 2)[1]
		require.Len(t, strings.Fields(during.header.Get("webhook-signature")), 2, "one signature per active secret")
		require.NoError(t, verify(rotated.Secret, during), "the new secret verifies")
		require.NoError(t, verify(ep.Secret, during), "the old secret still verifies during the overlap")
		require.ErrorIs(t, verify("whsec_"+strings.Repeat("A", 43)+"=", during), standardwebhooks.ErrNoMatchingSignature)
		tampered := during
		tampered.body = append([]byte(nil), during.body...)
		tampered.body[len(tampered.body)-2] ^= 1
		require.ErrorIs(t, verify(rotated.Secret, tampered), standardwebhooks.ErrNoMatchingSignature)

		// Rotate again as if 25 hours ago: the overlap of the second secret
		// is over, so only the third one signs.
		e.hooks.SetClock(func() time.Time { return time.Now().UTC().Add(-25 * time.Hour) })
		third, err := e.hooks.RotateSecret(ctx, admin(), ep.ID)
		require.NoError(t, err)
		_, err = e.hooks.SendTest(ctx, admin(), ep.ID)
		require.NoError(t, err)
		after := rcv.waitRequests(t, 3)[2]
		require.Len(t, strings.Fields(after.header.Get("webhook-signature")), 1)
		require.NoError(t, verify(third.Secret, after))
		require.ErrorIs(t, verify(rotated.Secret, after), standardwebhooks.ErrNoMatchingSignature)
	})
}

// TestSendTestDeliversWebhookTest: a test message reaches an endpoint
// whatever it subscribes to, signed, and is about no action.
func TestSendTestDeliversWebhookTest(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		ctx := context.Background()
		e := newHookEnv(t, st)
		rcv := newReceiver(t)
		ep := e.endpoint(t, EndpointOpts{URL: rcv.srv.URL, Events: []record.EventType{record.EventFailed}})
		queued, err := e.hooks.SendTest(ctx, admin(), ep.ID)
		require.NoError(t, err)
		require.Equal(t, webhooks.DeliveryPending, queued.State)
		require.Equal(t, record.EventTest, record.EventType(queued.EventType))
		require.Nil(t, queued.ActionID)
		startDispatcher(t, st, DispatcherOpts{})

		r := rcv.waitRequests(t, 1)[0]
		require.NoError(t, verify(ep.Secret, r))
		require.Equal(t, queued.WebhookID, r.header.Get("webhook-id"))
		m := messageOf(t, r)
		require.Equal(t, record.EventTest, m.Type)
		require.Equal(t, ep.ID, *m.Data.Endpoint)
		require.Nil(t, m.Data.Action)
		d := e.waitDelivery(t, ep.ID, func(d *webhooks.Delivery) bool { return d.State == webhooks.DeliverySucceeded })
		require.Equal(t, queued.ID, d.ID)

		_, err = e.hooks.SendTest(ctx, e.operator, ep.ID)
		requireCode(t, services.CodeForbidden, err)
		_, err = e.hooks.SendTest(ctx, admin(), "0193f2b0-1c2d-7e3f-8a4b-5c6d7e8f9a0b")
		requireCode(t, services.CodeNotFound, err)
	})
}

func requireCode(t *testing.T, code string, err error, what ...any) {
	t.Helper()
	require.Error(t, err, what...)
	e, ok := services.AsError(err)
	require.True(t, ok, "a coded error, got %v", err)
	require.Equal(t, code, e.Code, "%s (%v)", e.Message, what)
}

// TestFailingReceiverGetsTheSameMessageUntilItSucceeds: three 500s and then
// a 200 make four requests with one webhook-id, and every attempt is kept.
func TestFailingReceiverGetsTheSameMessageUntilItSucceeds(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newHookEnv(t, st)
		long := strings.Repeat("x", 5000)
		rcv := newReceiverWith(t, reply{status: 200, body: "thanks"},
			reply{status: 500, body: long}, reply{status: 500}, reply{status: 500})
		ep := e.endpoint(t, EndpointOpts{URL: rcv.srv.URL})
		e.timeOut(t, "k")
		startDispatcher(t, st, DispatcherOpts{Schedule: fast})

		d := e.waitDelivery(t, ep.ID, func(d *webhooks.Delivery) bool { return d.State == webhooks.DeliverySucceeded })
		reqs := rcv.got()
		require.Len(t, reqs, 4)
		for i, r := range reqs {
			require.Equal(t, d.WebhookID, r.header.Get("webhook-id"), "request %d", i+1)
			require.Equal(t, reqs[0].body, r.body, "request %d carries the same message", i+1)
			require.NoError(t, verify(ep.Secret, r), "request %d", i+1)
		}
		require.Equal(t, 4, d.AttemptCount)
		require.Equal(t, 200, *d.LastStatus)
		require.Nil(t, d.LastError)
		require.Nil(t, d.NextAttemptAt, "only pending deliveries have a next attempt")
		require.Len(t, d.Attempts, 4)
		wantExcerpts := []string{long[:1024], "reply 2", "reply 3", "thanks"}
		for i, a := range d.Attempts {
			want := 500
			if i == 3 {
				want = 200
			}
			require.Equal(t, want, *a.StatusCode, "attempt %d", i+1)
			require.Equal(t, wantExcerpts[i], a.ResponseExcerpt, "attempt %d keeps the first KiB", i+1)
			require.GreaterOrEqual(t, a.LatencyMs, 0)
			if i < 3 {
				require.Equal(t, "receiver answered 500", *a.Error)
			} else {
				require.Nil(t, a.Error)
			}
			if i > 0 {
				require.False(t, a.AttemptedAt.Before(d.Attempts[i-1].AttemptedAt), "attempts are oldest first")
			}
		}
		require.Nil(t, e.getEndpoint(t, ep.ID).FailingSince, "a success ends the failure streak")
	})
}

// TestDeliveryFailsWhenTheScheduleRunsOut: one attempt plus one per wait of
// the schedule, then the delivery has failed.
func TestDeliveryFailsWhenTheScheduleRunsOut(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newHookEnv(t, st)
		rcv := newReceiverWith(t, reply{status: 502})
		ep := e.endpoint(t, EndpointOpts{URL: rcv.srv.URL})
		e.timeOut(t, "k")
		startDispatcher(t, st, DispatcherOpts{Schedule: fast[:2]})

		d := e.waitDelivery(t, ep.ID, func(d *webhooks.Delivery) bool { return d.State == webhooks.DeliveryFailed })
		require.Equal(t, 3, d.AttemptCount)
		require.Len(t, d.Attempts, 3)
		require.Equal(t, 502, *d.LastStatus)
		require.Equal(t, "receiver answered 502", *d.LastError)
		require.Nil(t, d.NextAttemptAt)
		time.Sleep(100 * time.Millisecond)
		require.Len(t, rcv.got(), 3, "a failed delivery is not sent again")
		ep = e.getEndpoint(t, ep.ID)
		require.True(t, ep.Enabled, "far from DisableAfter, the endpoint stays enabled")
		require.NotNil(t, ep.FailingSince)
	})
}

// TestRetryAfterDelaysTheNextAttempt: a Retry-After longer than the schedule
// wins, in seconds or as an HTTP date.
func TestRetryAfterDelaysTheNextAttempt(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newHookEnv(t, st)
		date := time.Now().Add(time.Hour).UTC()
		cases := []struct {
			retryAfter string
			atLeast    time.Duration
		}{
			{"120", 120 * time.Second},
			{date.Format(http.TimeFormat), time.Hour - 5*time.Second},
		}
		rcvs := make([]*receiver, len(cases))
		eps := make([]*webhooks.Endpoint, len(cases))
		for i, c := range cases {
			rcvs[i] = newReceiverWith(t, reply{status: 200}, reply{status: 503, header: map[string]string{"Retry-After": c.retryAfter}})
			eps[i] = e.endpoint(t, EndpointOpts{URL: rcvs[i].srv.URL})
		}
		// A short Retry-After is honoured too, and the retry then succeeds.
		short := newReceiverWith(t, reply{status: 200}, reply{status: 503, header: map[string]string{"Retry-After": "1"}})
		shortEP := e.endpoint(t, EndpointOpts{URL: short.srv.URL})
		e.timeOut(t, "k")
		startDispatcher(t, st, DispatcherOpts{Schedule: fast})

		for i, c := range cases {
			d := e.waitDelivery(t, eps[i].ID, func(d *webhooks.Delivery) bool { return d.AttemptCount == 1 })
			require.Equal(t, webhooks.DeliveryPending, d.State)
			require.Equal(t, 503, *d.Attempts[0].StatusCode)
			require.GreaterOrEqual(t, d.NextAttemptAt.Sub(d.Attempts[0].AttemptedAt), c.atLeast,
				"Retry-After %q: next attempt at %s", c.retryAfter, d.NextAttemptAt)
		}
		d := e.waitDelivery(t, shortEP.ID, func(d *webhooks.Delivery) bool { return d.State == webhooks.DeliverySucceeded })
		require.Len(t, d.Attempts, 2)
		require.GreaterOrEqual(t, d.Attempts[1].AttemptedAt.Sub(d.Attempts[0].AttemptedAt), time.Second)
		for i := range cases {
			require.Len(t, rcvs[i].got(), 1, "no retry before Retry-After")
		}
	})
}

// TestGoneDisablesTheEndpoint: a 410 fails the delivery and disables the
// endpoint with a reason; later alerts are not queued for it.
func TestGoneDisablesTheEndpoint(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newHookEnv(t, st)
		rcv := newReceiver(t, http.StatusGone)
		ep := e.endpoint(t, EndpointOpts{URL: rcv.srv.URL})
		e.timeOut(t, "k1")
		startDispatcher(t, st, DispatcherOpts{Schedule: fast})

		d := e.waitDelivery(t, ep.ID, func(d *webhooks.Delivery) bool { return d.State == webhooks.DeliveryFailed })
		require.Equal(t, 1, d.AttemptCount)
		require.Equal(t, 410, *d.Attempts[0].StatusCode)
		got := e.getEndpoint(t, ep.ID)
		require.False(t, got.Enabled)
		require.Equal(t, "the receiver answered 410 Gone", *got.DisabledReason)

		e.timeOut(t, "k2")
		time.Sleep(100 * time.Millisecond)
		require.Len(t, e.deliveries(t, ep.ID), 1, "a disabled endpoint gets no new deliveries")
		require.Len(t, rcv.got(), 1)
	})
}

// TestFailingEndpointIsDisabledAfterDisableAfter: an endpoint that has failed
// without a success for longer than DisableAfter is disabled with a reason,
// its pending delivery waits, and enabling it sends that delivery.
func TestFailingEndpointIsDisabledAfterDisableAfter(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		ctx := context.Background()
		e := newHookEnv(t, st)
		rcv := newReceiverWith(t, reply{status: 500})
		ep := e.endpoint(t, EndpointOpts{URL: rcv.srv.URL})
		e.timeOut(t, "k")
		every := 40 * time.Millisecond
		startDispatcher(t, st, DispatcherOpts{DisableAfter: 100 * time.Millisecond,
			Schedule: []time.Duration{every, every, every, every, every, every, every}})

		require.Eventually(t, func() bool { return !e.getEndpoint(t, ep.ID).Enabled }, 10*time.Second, 5*time.Millisecond)
		got := e.getEndpoint(t, ep.ID)
		require.NotNil(t, got.FailingSince)
		require.Equal(t, "failing without a success since "+got.FailingSince.Format(time.RFC3339), *got.DisabledReason)
		d := e.deliveries(t, ep.ID)[0]
		require.Equal(t, webhooks.DeliveryPending, d.State, "the message waits for the endpoint to come back")
		require.GreaterOrEqual(t, d.AttemptCount, 2)
		require.Less(t, d.AttemptCount, 8)
		sent := len(rcv.got())
		require.Equal(t, d.AttemptCount, sent)
		time.Sleep(150 * time.Millisecond)
		require.Len(t, rcv.got(), sent, "nothing is sent to a disabled endpoint")

		rcv.setFallback(reply{status: 200})
		enabled, err := e.hooks.UpdateEndpoint(ctx, admin(), ep.ID, webhooks.EndpointInput{Enabled: new(true)})
		require.NoError(t, err)
		require.True(t, enabled.Enabled)
		require.Nil(t, enabled.DisabledReason)
		require.Nil(t, enabled.FailingSince)
		d = e.waitDelivery(t, ep.ID, func(d *webhooks.Delivery) bool { return d.State == webhooks.DeliverySucceeded })
		require.Equal(t, sent+1, d.AttemptCount)
	})
}

// TestDisabledEndpointGetsNothingUntilEnabled: a pending delivery waits while
// its endpoint is disabled; alerts written meanwhile are not queued for it.
func TestDisabledEndpointGetsNothingUntilEnabled(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		ctx := context.Background()
		e := newHookEnv(t, st)
		rcv := newReceiver(t)
		ep := e.endpoint(t, EndpointOpts{URL: rcv.srv.URL})
		first := e.timeOut(t, "before")
		off, err := e.hooks.UpdateEndpoint(ctx, admin(), ep.ID, webhooks.EndpointInput{Enabled: new(false)})
		require.NoError(t, err)
		require.False(t, off.Enabled)
		require.Equal(t, "disabled by an admin", *off.DisabledReason)
		e.timeOut(t, "while-disabled")
		startDispatcher(t, st, DispatcherOpts{})

		time.Sleep(200 * time.Millisecond)
		require.Empty(t, rcv.got())
		ds := e.deliveries(t, ep.ID)
		require.Len(t, ds, 1, "alerts written while disabled are not queued")
		require.Equal(t, webhooks.DeliveryPending, ds[0].State)

		_, err = e.hooks.UpdateEndpoint(ctx, admin(), ep.ID, webhooks.EndpointInput{Enabled: new(true)})
		require.NoError(t, err)
		r := rcv.waitRequests(t, 1)[0]
		require.Equal(t, first.ID, messageOf(t, r).Data.Action.ID)
		time.Sleep(100 * time.Millisecond)
		require.Len(t, rcv.got(), 1)
	})
}

// TestRedeliverKeepsTheWebhookID: a redelivery is a new delivery of the same
// message, so receivers deduplicate it by webhook-id.
func TestRedeliverKeepsTheWebhookID(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		ctx := context.Background()
		e := newHookEnv(t, st)
		rcv := newReceiver(t)
		ep := e.endpoint(t, EndpointOpts{URL: rcv.srv.URL})
		e.timeOut(t, "k")
		startDispatcher(t, st, DispatcherOpts{})
		old := e.waitDelivery(t, ep.ID, func(d *webhooks.Delivery) bool { return d.State == webhooks.DeliverySucceeded })

		again, err := e.hooks.Redeliver(ctx, admin(), old.ID)
		require.NoError(t, err)
		require.NotEqual(t, old.ID, again.ID)
		require.Equal(t, old.WebhookID, again.WebhookID)
		require.Equal(t, old.MessageID, again.MessageID)
		require.Equal(t, webhooks.DeliveryPending, again.State)

		reqs := rcv.waitRequests(t, 2)
		require.Equal(t, reqs[0].header.Get("webhook-id"), reqs[1].header.Get("webhook-id"))
		require.Equal(t, reqs[0].body, reqs[1].body)
		require.NoError(t, verify(ep.Secret, reqs[1]))
		newest := e.waitDelivery(t, ep.ID, func(d *webhooks.Delivery) bool { return d.State == webhooks.DeliverySucceeded })
		require.Equal(t, again.ID, newest.ID)
		require.Len(t, e.deliveries(t, ep.ID), 2)

		_, err = e.hooks.Redeliver(ctx, e.operator, old.ID)
		requireCode(t, services.CodeForbidden, err)
		_, err = e.hooks.Redeliver(ctx, admin(), "not-a-uuid")
		requireCode(t, services.CodeNotFound, err)
	})
}

// TestSlackFormat: a Slack message links to the action's page and escapes
// what Slack would read as markup.
func TestSlackFormat(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		ctx := context.Background()
		e := newHookEnv(t, st)
		rcv := newReceiver(t)
		ep := e.endpoint(t, EndpointOpts{URL: rcv.srv.URL, Format: webhooks.FormatSlack,
			Events: []record.EventType{record.EventTimedOut, record.EventDecided}})
		key := `refund:<b>&"x"`
		raw := fmt.Sprintf(`{"key":%q,"type":"intent","tool":"pay<!channel>","reference":"<!here> & co","timeout":1}`, key)
		require.Equal(t, record.OutcomeProceed, submit(t, e.l, e.agent, raw).Outcome)
		e.clock.Advance(2 * time.Second)
		_, err := e.l.Sweep(ctx)
		require.NoError(t, err)
		a, err := e.l.ActionByKey(ctx, e.agent, "", key)
		require.NoError(t, err)
		_, _, err = e.l.Decide(ctx, e.operator, a.ID, services.DecisionInput{Decision: "abandon", Reason: "<@U123> & <script>"})
		require.NoError(t, err)
		startDispatcher(t, st, DispatcherOpts{PublicURL: "https://arbiter.example.com/"})

		reqs := rcv.waitRequests(t, 2)
		byText := map[record.EventType]string{}
		for _, r := range reqs {
			require.NoError(t, verify(ep.Secret, r), "Slack messages are signed too")
			var m struct {
				Text   string `json:"text"`
				Blocks []struct {
					Type string `json:"type"`
					Text struct {
						Type string `json:"type"`
						Text string `json:"text"`
					} `json:"text"`
				} `json:"blocks"`
			}
			require.NoError(t, json.Unmarshal(r.body, &m), "%s", r.body)
			require.Len(t, m.Blocks, 1)
			require.Equal(t, "section", m.Blocks[0].Type)
			require.Equal(t, "mrkdwn", m.Blocks[0].Text.Type)
			require.NotContains(t, m.Text, "<", "the notification line carries no markup")
			byText[record.EventType(strings.SplitN(m.Text, ":", 2)[0])] = m.Blocks[0].Text.Text
		}
		link := "<https://arbiter.example.com/actions/" + a.ID + `|refund:&lt;b&gt;&amp;"x">`
		for _, ev := range []record.EventType{record.EventTimedOut, record.EventDecided} {
			text := byText[ev]
			require.Contains(t, text, "*"+string(ev)+"* — "+link)
			require.Equal(t, 1, strings.Count(text, "<"), "the link is the only markup: %s", text)
			require.Contains(t, text, "namespace `"+e.ns+"` · tool `pay&lt;!channel&gt;`")
			require.Contains(t, text, "reference: &lt;!here&gt; &amp; co")
		}
		require.Contains(t, byText[record.EventTimedOut], "status *timed_out*")
		require.Contains(t, byText[record.EventDecided], "status *abandoned*")
		require.Contains(t, byText[record.EventDecided], "alice@example.com decided *abandon*: &lt;@U123&gt; &amp; &lt;script&gt;")
	})
}

// TestEndpointManagement: creation defaults and validation, listing without
// secrets, changes, deletion with the deliveries, admins only.
func TestEndpointManagement(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		ctx := context.Background()
		e := newHookEnv(t, st)
		url := "http://127.0.0.1:9/hook"
		ep, err := e.hooks.CreateEndpoint(ctx, admin(), webhooks.EndpointInput{URL: &url,
			EventTypes: &[]record.EventType{record.EventTimedOut, record.EventDecided, record.EventTimedOut}})
		require.NoError(t, err)
		require.Equal(t, []record.EventType{record.EventDecided, record.EventTimedOut}, ep.EventTypes, "sorted, without duplicates")
		require.Equal(t, []string{}, ep.Namespaces)
		require.Equal(t, webhooks.FormatStandard, ep.Format)
		require.True(t, ep.Enabled)
		require.Nil(t, ep.DisabledReason)

		list, err := e.hooks.Endpoints(ctx, admin())
		require.NoError(t, err)
		require.Len(t, list, 1)
		require.Equal(t, ep.ID, list[0].ID)
		require.Empty(t, list[0].Secret)

		desc, slack := "on-call", webhooks.FormatSlack
		changed, err := e.hooks.UpdateEndpoint(ctx, admin(), ep.ID, webhooks.EndpointInput{
			Description: &desc, Format: &slack, Namespaces: &[]string{e.ns}})
		require.NoError(t, err)
		require.Equal(t, "on-call", changed.Description)
		require.Equal(t, webhooks.FormatSlack, changed.Format)
		require.Equal(t, []string{e.ns}, changed.Namespaces)
		require.Equal(t, ep.EventTypes, changed.EventTypes, "fields not sent are kept")
		require.Empty(t, changed.Secret)

		for name, in := range map[string]webhooks.EndpointInput{
			"no url":        {EventTypes: &[]record.EventType{record.EventTimedOut}},
			"no events":     {URL: &url, EventTypes: &[]record.EventType{}},
			"unknown event": {URL: &url, EventTypes: &[]record.EventType{"action.done"}},
			"bad format":    {URL: &url, EventTypes: &[]record.EventType{record.EventTimedOut}, Format: new("xml")},
			"bad namespace": {URL: &url, EventTypes: &[]record.EventType{record.EventTimedOut}, Namespaces: &[]string{"Not OK"}},
			"long desc":     {URL: &url, EventTypes: &[]record.EventType{record.EventTimedOut}, Description: new(strings.Repeat("d", 1025))},
		} {
			_, err := e.hooks.CreateEndpoint(ctx, admin(), in)
			requireCode(t, services.CodeInvalid, err, name)
		}
		_, err = e.hooks.CreateEndpoint(ctx, e.operator, webhooks.EndpointInput{URL: &url, EventTypes: &[]record.EventType{record.EventTimedOut}})
		requireCode(t, services.CodeForbidden, err)
		_, err = e.hooks.Endpoints(ctx, e.agent)
		requireCode(t, services.CodeForbidden, err)

		_, err = e.hooks.SendTest(ctx, admin(), ep.ID)
		require.NoError(t, err)
		require.NoError(t, e.hooks.DeleteEndpoint(ctx, admin(), ep.ID))
		_, err = e.hooks.Endpoint(ctx, admin(), ep.ID)
		requireCode(t, services.CodeNotFound, err)
		requireCode(t, services.CodeNotFound, e.hooks.DeleteEndpoint(ctx, admin(), ep.ID))
		n, err := st.CountRows(ctx, "webhook_deliveries")
		require.NoError(t, err)
		require.Zero(t, n, "deleting an endpoint deletes its deliveries")
	})
}

// TestQueueStats: what /metrics reports about pending deliveries.
func TestQueueStats(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		ctx := context.Background()
		e := newHookEnv(t, st)
		ep := e.endpoint(t, EndpointOpts{URL: "http://127.0.0.1:9/"})
		d := webhooks.NewDispatcher(st, slog.New(slog.DiscardHandler), webhooks.AddressPolicy{})
		q, err := d.Queue(ctx)
		require.NoError(t, err)
		require.Equal(t, webhooks.QueueStats{}, q)
		_, err = e.hooks.SendTest(ctx, admin(), ep.ID)
		require.NoError(t, err)
		time.Sleep(20 * time.Millisecond)
		q, err = d.Queue(ctx)
		require.NoError(t, err)
		require.EqualValues(t, 1, q.Pending)
		require.Greater(t, q.OldestPendingAge, 10*time.Millisecond)
		require.Less(t, q.OldestPendingAge, time.Minute)

		_, err = e.hooks.UpdateEndpoint(ctx, admin(), ep.ID, webhooks.EndpointInput{Enabled: new(false)})
		require.NoError(t, err)
		q, err = d.Queue(ctx)
		require.NoError(t, err)
		require.Equal(t, webhooks.QueueStats{}, q, "a disabled endpoint's deliveries wait for an admin, not for the dispatcher")
	})
}

// TestSlowEndpointDoesNotHoldUpOthers: an endpoint at its concurrency bound
// with a backlog of older deliveries does not keep another endpoint's newer
// alert waiting.
func TestSlowEndpointDoesNotHoldUpOthers(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		ctx := context.Background()
		e := newHookEnv(t, st)
		release := make(chan struct{})
		slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}))
		t.Cleanup(slow.Close)
		slowEP := e.endpoint(t, EndpointOpts{URL: slow.URL})
		for range 20 {
			_, err := e.hooks.SendTest(ctx, admin(), slowEP.ID)
			require.NoError(t, err)
		}
		time.Sleep(5 * time.Millisecond)
		fast := newReceiver(t)
		fastEP := e.endpoint(t, EndpointOpts{URL: fast.srv.URL})
		_, err := e.hooks.SendTest(ctx, admin(), fastEP.ID)
		require.NoError(t, err)

		d := webhooks.NewDispatcher(st, slog.New(slog.DiscardHandler), webhooks.AddressPolicy{AllowPrivate: true})
		d.Poll, d.Workers, d.PerEndpoint = 10*time.Millisecond, 4, 2
		dctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { d.Run(dctx); close(done) }()
		t.Cleanup(func() { close(release); cancel(); <-done })

		start := time.Now()
		fast.waitRequests(t, 1)
		require.Less(t, time.Since(start), 2*time.Second)
	})
}

// logLeases makes the database note, after every change to deliveries, how
// many deliveries of each endpoint are leased, and returns a function that
// reads the most ever leased of one endpoint ("all": of all endpoints at
// once).
func logLeases(t *testing.T, st *services.Store) func(endpointID string) int {
	t.Helper()
	ctx := context.Background()
	const snapshot = `INSERT INTO lease_log SELECT CAST(endpoint_id AS text), count(*) FROM webhook_deliveries
		WHERE claim IS NOT NULL GROUP BY endpoint_id
		UNION ALL SELECT 'all', count(*) FROM webhook_deliveries WHERE claim IS NOT NULL`
	stmts := []string{
		`CREATE TABLE lease_log (endpoint_id text NOT NULL, leased integer NOT NULL)`,
		`CREATE TRIGGER log_leases AFTER UPDATE ON webhook_deliveries BEGIN ` + snapshot + `; END`,
	}
	if st.Dialect == services.Postgres {
		stmts = []string{
			`CREATE TABLE lease_log (endpoint_id text NOT NULL, leased integer NOT NULL)`,
			`CREATE FUNCTION log_leases() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN ` + snapshot + `; RETURN NULL; END $$`,
			`CREATE TRIGGER log_leases AFTER UPDATE ON webhook_deliveries FOR EACH STATEMENT EXECUTE FUNCTION log_leases()`,
		}
	}
	for _, q := range stmts {
		require.NoError(t, st.ExecForTest(ctx, q), q)
	}
	return func(endpointID string) int {
		t.Helper()
		n, err := st.IntForTest(ctx, `SELECT max(leased) FROM lease_log WHERE endpoint_id = '`+endpointID+`'`)
		require.NoError(t, err)
		return n
	}
}

// TestClaimTakesOnlyFreeSlots: the dispatcher leases no more of an
// endpoint's deliveries than the endpoint has free slots, and no more in all
// than it has workers, so it never has to give any back; the database is
// watched by a trigger after every change to deliveries.
func TestClaimTakesOnlyFreeSlots(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		ctx := context.Background()
		e := newHookEnv(t, st)
		release := make(chan struct{})
		type slowReceiver struct {
			srv      *httptest.Server
			mu       sync.Mutex
			inFlight int
			ids      map[string]int
		}
		newSlow := func() *slowReceiver {
			r := &slowReceiver{ids: map[string]int{}}
			r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
				r.mu.Lock()
				r.inFlight++
				r.ids[req.Header.Get("webhook-id")]++
				r.mu.Unlock()
				select {
				case <-release:
				case <-req.Context().Done():
				}
				r.mu.Lock()
				r.inFlight--
				r.mu.Unlock()
			}))
			t.Cleanup(r.srv.Close)
			return r
		}
		count := func(r *slowReceiver) (inFlight, distinct, total int) {
			r.mu.Lock()
			defer r.mu.Unlock()
			for _, n := range r.ids {
				total += n
			}
			return r.inFlight, len(r.ids), total
		}
		a, b := newSlow(), newSlow()
		epA := e.endpoint(t, EndpointOpts{URL: a.srv.URL})
		epB := e.endpoint(t, EndpointOpts{URL: b.srv.URL})
		const each = 10
		for _, ep := range []string{epA.ID, epB.ID} {
			for range each {
				_, err := e.hooks.SendTest(ctx, admin(), ep)
				require.NoError(t, err)
			}
		}
		maxLeased := logLeases(t, st)

		d := webhooks.NewDispatcher(st, slog.New(slog.DiscardHandler), webhooks.AddressPolicy{AllowPrivate: true})
		d.Poll, d.Workers, d.PerEndpoint = 10*time.Millisecond, 5, 3
		dctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { d.Run(dctx); close(done) }()
		released := false
		t.Cleanup(func() {
			if !released {
				close(release)
			}
			cancel()
			<-done
		})

		// Every worker is busy: the oldest endpoint has its 3, the other
		// the 2 workers left. Polls meanwhile find no free slot.
		require.Eventually(t, func() bool {
			na, _, _ := count(a)
			nb, _, _ := count(b)
			return na == 3 && nb == 2
		}, 10*time.Second, 5*time.Millisecond)
		time.Sleep(100 * time.Millisecond)
		na, _, _ := count(a)
		nb, _, _ := count(b)
		require.Equal(t, []int{3, 2}, []int{na, nb}, "requests in flight per endpoint")
		require.Equal(t, 3, maxLeased(epA.ID), "leased deliveries of the first endpoint, at most")
		require.Equal(t, 2, maxLeased(epB.ID), "leased deliveries of the second endpoint, at most")
		require.Equal(t, 5, maxLeased("all"), "leased deliveries in all, at most")

		close(release)
		released = true
		require.Eventually(t, func() bool {
			_, da, _ := count(a)
			_, db, _ := count(b)
			return da == each && db == each
		}, 10*time.Second, 5*time.Millisecond)
		for _, ep := range []string{epA.ID, epB.ID} {
			require.Eventually(t, func() bool {
				for _, d := range e.deliveries(t, ep) {
					if d.State != webhooks.DeliverySucceeded {
						return false
					}
				}
				return true
			}, 10*time.Second, 5*time.Millisecond)
		}
		for _, r := range []*slowReceiver{a, b} {
			_, distinct, total := count(r)
			require.Equal(t, each, distinct)
			require.Equal(t, each, total, "each message was sent once")
		}
		require.LessOrEqual(t, maxLeased(epA.ID), 3, "never more than the endpoint's slots")
		require.LessOrEqual(t, maxLeased(epB.ID), 3, "never more than the endpoint's slots")
		require.LessOrEqual(t, maxLeased("all"), 5, "never more than the workers")
	})
}
