package webhooks_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/arbiter-ledger/arbiter/services/webhooks"
	"github.com/arbiter-ledger/arbiter/services/webhooks/webhookstest"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
	"github.com/arbiter-ledger/arbiter/services/record"
)

// The webhook suite: delivery, signatures, retries and endpoint health, on
// both databases. Signatures are checked with the official Standard Webhooks
// library (webhookstest.Verify), an oracle independent of signing.go.
// Address checks are in ssrf_test.go; the outbox's atomicity and the alerts
// each change writes are the ledger's (services/webhook_outbox_test.go).

// hookEnv is a fixture with the webhook service beside its ledger.
type hookEnv struct {
	*fixture
	hooks *webhooks.Webhooks
}

func newHookEnv(t *testing.T, st *services.Store) *hookEnv {
	t.Helper()
	return &hookEnv{fixture: newFixture(t, st),
		hooks: webhooks.New(st, webhooks.Config{Policy: webhooks.AddressPolicy{AllowPrivate: true}})}
}

func (e *hookEnv) endpoint(t *testing.T, o webhookstest.EndpointOpts) *webhooks.Endpoint {
	t.Helper()
	return webhookstest.Endpoint(t, e.hooks, o)
}

// timeOut records an intent for key with a one-second lease, lets it pass
// and sweeps, which alerts action.timed_out.
func (e *hookEnv) timeOut(t *testing.T, key string) *record.Action {
	t.Helper()
	res := submit(t, e.l, e.agent, intent(key, 1))
	require.Equal(t, record.OutcomeProceed, res.Outcome)
	e.clock.Advance(2 * time.Second)
	_, err := e.l.Sweep(context.Background())
	require.NoError(t, err)
	a, err := e.l.ActionByKey(context.Background(), e.agent, "", key)
	require.NoError(t, err)
	require.Equal(t, record.StatusTimedOut, a.Status)
	return a
}

func (e *hookEnv) deliveries(t *testing.T, endpointID string) []*webhooks.Delivery {
	t.Helper()
	return webhookstest.Deliveries(t, e.hooks, endpointID)
}

func (e *hookEnv) waitDelivery(t *testing.T, endpointID string, ok func(d *webhooks.Delivery) bool) *webhooks.Delivery {
	t.Helper()
	return webhookstest.WaitDelivery(t, e.hooks, endpointID, ok)
}

func (e *hookEnv) getEndpoint(t *testing.T, id string) *webhooks.Endpoint {
	t.Helper()
	ep, err := e.hooks.Endpoint(context.Background(), webhookstest.Admin(), id)
	require.NoError(t, err)
	return ep
}

// TestTimedOutActionIsDelivered: the sweeper's change writes an alert in
// its own transaction, and the dispatcher delivers it signed.
func TestTimedOutActionIsDelivered(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		ctx := context.Background()
		rcv := webhookstest.NewReceiver(t)
		hooks := webhooks.New(st, webhooks.Config{Policy: webhooks.AddressPolicy{AllowPrivate: true}})
		ep, err := hooks.CreateEndpoint(ctx, webhookstest.Admin(), webhooks.EndpointInput{URL: &rcv.URL, EventTypes: &[]record.EventType{record.EventTimedOut}})
		require.NoError(t, err)
		require.Regexp(t, `^whsec_`, ep.Secret)

		f := newFixture(t, st)
		submit(t, f.l, f.agent, intent("k", 1))
		f.clock.Advance(2 * time.Second)
		n, err := f.l.Sweep(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, n)

		d := webhooks.NewDispatcher(st, slog.New(slog.DiscardHandler), webhooks.DispatcherConfig{Policy: webhooks.AddressPolicy{AllowPrivate: true}})
		dctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { d.Run(dctx); close(done) }()
		require.Eventually(t, func() bool { return len(rcv.Got()) == 1 }, 5*time.Second, 10*time.Millisecond)
		cancel()
		<-done

		req := rcv.Got()[0]
		wh, err := standardwebhooks.NewWebhook(ep.Secret)
		require.NoError(t, err)
		require.NoError(t, wh.Verify(req.Body, req.Header), "the Standard Webhooks library accepts the signature")
		var body services.MessageBody
		require.NoError(t, json.Unmarshal(req.Body, &body))
		require.Equal(t, record.EventTimedOut, body.Type)
		require.Equal(t, record.StatusTimedOut, body.Data.Action.Status)
		require.Equal(t, record.TypeTimedOut, body.Data.Entry.Type)
		require.Equal(t, 2, body.Data.Entry.Seq, "the entry's seq is the one the ledger assigned")
		require.Equal(t, "application/json", req.Header.Get("Content-Type"))

		ds, err := hooks.EndpointDeliveries(ctx, webhookstest.Admin(), ep.ID, 10)
		require.NoError(t, err)
		require.Len(t, ds, 1)
		require.Equal(t, webhooks.DeliverySucceeded, ds[0].State)
		require.Equal(t, req.Header.Get("webhook-id"), ds[0].WebhookID)
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
		rcv := webhookstest.NewReceiver(t)
		ep := e.endpoint(t, webhookstest.EndpointOpts{URL: rcv.URL})
		webhookstest.StartDispatcher(t, st, webhookstest.DispatcherOpts{})

		_, err := e.hooks.SendTest(ctx, webhookstest.Admin(), ep.ID)
		require.NoError(t, err)
		before := rcv.WaitRequests(t, 1)[0]
		require.Len(t, strings.Fields(before.Header.Get("webhook-signature")), 1)
		require.NoError(t, webhookstest.Verify(ep.Secret, before))

		rotated, err := e.hooks.RotateSecret(ctx, webhookstest.Admin(), ep.ID)
		require.NoError(t, err)
		require.Regexp(t, `^whsec_[A-Za-z0-9+/]{43}=$`, rotated.Secret, "32 random bytes")
		require.NotEqual(t, ep.Secret, rotated.Secret)
		require.Empty(t, e.getEndpoint(t, ep.ID).Secret, "the secret is shown only at creation and rotation")

		_, err = e.hooks.SendTest(ctx, webhookstest.Admin(), ep.ID)
		require.NoError(t, err)
		during := rcv.WaitRequests(t, 2)[1]
		require.Len(t, strings.Fields(during.Header.Get("webhook-signature")), 2, "one signature per active secret")
		require.NoError(t, webhookstest.Verify(rotated.Secret, during), "the new secret verifies")
		require.NoError(t, webhookstest.Verify(ep.Secret, during), "the old secret still verifies during the overlap")
		require.ErrorIs(t, webhookstest.Verify("whsec_"+strings.Repeat("A", 43)+"=", during), standardwebhooks.ErrNoMatchingSignature)
		tampered := during
		tampered.Body = append([]byte(nil), during.Body...)
		tampered.Body[len(tampered.Body)-2] ^= 1
		require.ErrorIs(t, webhookstest.Verify(rotated.Secret, tampered), standardwebhooks.ErrNoMatchingSignature)

		// Rotate again as if 25 hours ago: the overlap of the second secret
		// is over, so only the third one signs.
		e.hooks = webhooks.New(st, webhooks.Config{Policy: webhooks.AddressPolicy{AllowPrivate: true},
			Now: func() time.Time { return time.Now().UTC().Add(-25 * time.Hour) }})
		third, err := e.hooks.RotateSecret(ctx, webhookstest.Admin(), ep.ID)
		require.NoError(t, err)
		_, err = e.hooks.SendTest(ctx, webhookstest.Admin(), ep.ID)
		require.NoError(t, err)
		after := rcv.WaitRequests(t, 3)[2]
		require.Len(t, strings.Fields(after.Header.Get("webhook-signature")), 1)
		require.NoError(t, webhookstest.Verify(third.Secret, after))
		require.ErrorIs(t, webhookstest.Verify(rotated.Secret, after), standardwebhooks.ErrNoMatchingSignature)
	})
}

// TestSendTestDeliversWebhookTest: a test message reaches an endpoint
// whatever it subscribes to, signed, and is about no action.
func TestSendTestDeliversWebhookTest(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		ctx := context.Background()
		e := newHookEnv(t, st)
		rcv := webhookstest.NewReceiver(t)
		ep := e.endpoint(t, webhookstest.EndpointOpts{URL: rcv.URL, Events: []record.EventType{record.EventFailed}})
		queued, err := e.hooks.SendTest(ctx, webhookstest.Admin(), ep.ID)
		require.NoError(t, err)
		require.Equal(t, webhooks.DeliveryPending, queued.State)
		require.Equal(t, record.EventTest, record.EventType(queued.EventType))
		require.Nil(t, queued.ActionID)
		webhookstest.StartDispatcher(t, st, webhookstest.DispatcherOpts{})

		r := rcv.WaitRequests(t, 1)[0]
		require.NoError(t, webhookstest.Verify(ep.Secret, r))
		require.Equal(t, queued.WebhookID, r.Header.Get("webhook-id"))
		m := webhookstest.MessageOf(t, r)
		require.Equal(t, record.EventTest, m.Type)
		require.Equal(t, ep.ID, *m.Data.Endpoint)
		require.Nil(t, m.Data.Action)
		d := e.waitDelivery(t, ep.ID, func(d *webhooks.Delivery) bool { return d.State == webhooks.DeliverySucceeded })
		require.Equal(t, queued.ID, d.ID)

		_, err = e.hooks.SendTest(ctx, e.operator, ep.ID)
		webhookstest.RequireCode(t, services.CodeForbidden, err)
		_, err = e.hooks.SendTest(ctx, webhookstest.Admin(), "0193f2b0-1c2d-7e3f-8a4b-5c6d7e8f9a0b")
		webhookstest.RequireCode(t, services.CodeNotFound, err)
	})
}

// TestFailingReceiverGetsTheSameMessageUntilItSucceeds: three 500s and then
// a 200 make four requests with one webhook-id, and every attempt is kept.
func TestFailingReceiverGetsTheSameMessageUntilItSucceeds(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newHookEnv(t, st)
		long := strings.Repeat("x", 5000)
		rcv := webhookstest.NewReceiverWith(t, webhookstest.Reply{Status: 200, Body: "thanks"},
			webhookstest.Reply{Status: 500, Body: long}, webhookstest.Reply{Status: 500}, webhookstest.Reply{Status: 500})
		ep := e.endpoint(t, webhookstest.EndpointOpts{URL: rcv.URL})
		e.timeOut(t, "k")
		webhookstest.StartDispatcher(t, st, webhookstest.DispatcherOpts{Schedule: webhookstest.Fast})

		d := e.waitDelivery(t, ep.ID, func(d *webhooks.Delivery) bool { return d.State == webhooks.DeliverySucceeded })
		reqs := rcv.Got()
		require.Len(t, reqs, 4)
		for i, r := range reqs {
			require.Equal(t, d.WebhookID, r.Header.Get("webhook-id"), "request %d", i+1)
			require.Equal(t, reqs[0].Body, r.Body, "request %d carries the same message", i+1)
			require.NoError(t, webhookstest.Verify(ep.Secret, r), "request %d", i+1)
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
		rcv := webhookstest.NewReceiverWith(t, webhookstest.Reply{Status: 502})
		ep := e.endpoint(t, webhookstest.EndpointOpts{URL: rcv.URL})
		e.timeOut(t, "k")
		webhookstest.StartDispatcher(t, st, webhookstest.DispatcherOpts{Schedule: webhookstest.Fast[:2]})

		d := e.waitDelivery(t, ep.ID, func(d *webhooks.Delivery) bool { return d.State == webhooks.DeliveryFailed })
		require.Equal(t, 3, d.AttemptCount)
		require.Len(t, d.Attempts, 3)
		require.Equal(t, 502, *d.LastStatus)
		require.Equal(t, "receiver answered 502", *d.LastError)
		require.Nil(t, d.NextAttemptAt)
		time.Sleep(100 * time.Millisecond)
		require.Len(t, rcv.Got(), 3, "a failed delivery is not sent again")
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
		rcvs := make([]*webhookstest.Receiver, len(cases))
		eps := make([]*webhooks.Endpoint, len(cases))
		for i, c := range cases {
			rcvs[i] = webhookstest.NewReceiverWith(t, webhookstest.Reply{Status: 200}, webhookstest.Reply{Status: 503, Header: map[string]string{"Retry-After": c.retryAfter}})
			eps[i] = e.endpoint(t, webhookstest.EndpointOpts{URL: rcvs[i].URL})
		}
		// A short Retry-After is honoured too, and the retry then succeeds.
		short := webhookstest.NewReceiverWith(t, webhookstest.Reply{Status: 200}, webhookstest.Reply{Status: 503, Header: map[string]string{"Retry-After": "1"}})
		shortEP := e.endpoint(t, webhookstest.EndpointOpts{URL: short.URL})
		e.timeOut(t, "k")
		webhookstest.StartDispatcher(t, st, webhookstest.DispatcherOpts{Schedule: webhookstest.Fast})

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
			require.Len(t, rcvs[i].Got(), 1, "no retry before Retry-After")
		}
	})
}

// TestGoneDisablesTheEndpoint: a 410 fails the delivery and disables the
// endpoint with a reason; later alerts are not queued for it.
func TestGoneDisablesTheEndpoint(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newHookEnv(t, st)
		rcv := webhookstest.NewReceiver(t, http.StatusGone)
		ep := e.endpoint(t, webhookstest.EndpointOpts{URL: rcv.URL})
		e.timeOut(t, "k1")
		webhookstest.StartDispatcher(t, st, webhookstest.DispatcherOpts{Schedule: webhookstest.Fast})

		d := e.waitDelivery(t, ep.ID, func(d *webhooks.Delivery) bool { return d.State == webhooks.DeliveryFailed })
		require.Equal(t, 1, d.AttemptCount)
		require.Equal(t, 410, *d.Attempts[0].StatusCode)
		got := e.getEndpoint(t, ep.ID)
		require.False(t, got.Enabled)
		require.Equal(t, "the receiver answered 410 Gone", *got.DisabledReason)

		e.timeOut(t, "k2")
		time.Sleep(100 * time.Millisecond)
		require.Len(t, e.deliveries(t, ep.ID), 1, "a disabled endpoint gets no new deliveries")
		require.Len(t, rcv.Got(), 1)
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
		rcv := webhookstest.NewReceiverWith(t, webhookstest.Reply{Status: 500})
		ep := e.endpoint(t, webhookstest.EndpointOpts{URL: rcv.URL})
		e.timeOut(t, "k")
		every := 40 * time.Millisecond
		webhookstest.StartDispatcher(t, st, webhookstest.DispatcherOpts{DisableAfter: 100 * time.Millisecond,
			Schedule: []time.Duration{every, every, every, every, every, every, every}})

		require.Eventually(t, func() bool { return !e.getEndpoint(t, ep.ID).Enabled }, 10*time.Second, 5*time.Millisecond)
		got := e.getEndpoint(t, ep.ID)
		require.NotNil(t, got.FailingSince)
		require.Equal(t, "failing without a success since "+got.FailingSince.Format(time.RFC3339), *got.DisabledReason)
		d := e.deliveries(t, ep.ID)[0]
		require.Equal(t, webhooks.DeliveryPending, d.State, "the message waits for the endpoint to come back")
		require.GreaterOrEqual(t, d.AttemptCount, 2)
		require.Less(t, d.AttemptCount, 8)
		sent := len(rcv.Got())
		require.Equal(t, d.AttemptCount, sent)
		time.Sleep(150 * time.Millisecond)
		require.Len(t, rcv.Got(), sent, "nothing is sent to a disabled endpoint")

		rcv.SetFallback(webhookstest.Reply{Status: 200})
		enabled, err := e.hooks.UpdateEndpoint(ctx, webhookstest.Admin(), ep.ID, webhooks.EndpointInput{Enabled: new(true)})
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
		rcv := webhookstest.NewReceiver(t)
		ep := e.endpoint(t, webhookstest.EndpointOpts{URL: rcv.URL})
		first := e.timeOut(t, "before")
		off, err := e.hooks.UpdateEndpoint(ctx, webhookstest.Admin(), ep.ID, webhooks.EndpointInput{Enabled: new(false)})
		require.NoError(t, err)
		require.False(t, off.Enabled)
		require.Equal(t, "disabled by an admin", *off.DisabledReason)
		e.timeOut(t, "while-disabled")
		webhookstest.StartDispatcher(t, st, webhookstest.DispatcherOpts{})

		time.Sleep(200 * time.Millisecond)
		require.Empty(t, rcv.Got())
		ds := e.deliveries(t, ep.ID)
		require.Len(t, ds, 1, "alerts written while disabled are not queued")
		require.Equal(t, webhooks.DeliveryPending, ds[0].State)

		_, err = e.hooks.UpdateEndpoint(ctx, webhookstest.Admin(), ep.ID, webhooks.EndpointInput{Enabled: new(true)})
		require.NoError(t, err)
		r := rcv.WaitRequests(t, 1)[0]
		require.Equal(t, first.ID, webhookstest.MessageOf(t, r).Data.Action.ID)
		time.Sleep(100 * time.Millisecond)
		require.Len(t, rcv.Got(), 1)
	})
}

// TestRedeliverKeepsTheWebhookID: a redelivery is a new delivery of the same
// message, so receivers deduplicate it by webhook-id.
func TestRedeliverKeepsTheWebhookID(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		ctx := context.Background()
		e := newHookEnv(t, st)
		rcv := webhookstest.NewReceiver(t)
		ep := e.endpoint(t, webhookstest.EndpointOpts{URL: rcv.URL})
		e.timeOut(t, "k")
		webhookstest.StartDispatcher(t, st, webhookstest.DispatcherOpts{})
		old := e.waitDelivery(t, ep.ID, func(d *webhooks.Delivery) bool { return d.State == webhooks.DeliverySucceeded })

		again, err := e.hooks.Redeliver(ctx, webhookstest.Admin(), old.ID)
		require.NoError(t, err)
		require.NotEqual(t, old.ID, again.ID)
		require.Equal(t, old.WebhookID, again.WebhookID)
		require.Equal(t, old.MessageID, again.MessageID)
		require.Equal(t, webhooks.DeliveryPending, again.State)

		reqs := rcv.WaitRequests(t, 2)
		require.Equal(t, reqs[0].Header.Get("webhook-id"), reqs[1].Header.Get("webhook-id"))
		require.Equal(t, reqs[0].Body, reqs[1].Body)
		require.NoError(t, webhookstest.Verify(ep.Secret, reqs[1]))
		newest := e.waitDelivery(t, ep.ID, func(d *webhooks.Delivery) bool { return d.State == webhooks.DeliverySucceeded })
		require.Equal(t, again.ID, newest.ID)
		require.Len(t, e.deliveries(t, ep.ID), 2)

		_, err = e.hooks.Redeliver(ctx, e.operator, old.ID)
		webhookstest.RequireCode(t, services.CodeForbidden, err)
		_, err = e.hooks.Redeliver(ctx, webhookstest.Admin(), "not-a-uuid")
		webhookstest.RequireCode(t, services.CodeNotFound, err)
	})
}

// TestSlackFormat: a Slack message links to the action's page and escapes
// what Slack would read as markup.
func TestSlackFormat(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		ctx := context.Background()
		e := newHookEnv(t, st)
		rcv := webhookstest.NewReceiver(t)
		ep := e.endpoint(t, webhookstest.EndpointOpts{URL: rcv.URL, Format: webhooks.FormatSlack,
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
		webhookstest.StartDispatcher(t, st, webhookstest.DispatcherOpts{PublicURL: "https://arbiter.example.com/"})

		reqs := rcv.WaitRequests(t, 2)
		byText := map[record.EventType]string{}
		for _, r := range reqs {
			require.NoError(t, webhookstest.Verify(ep.Secret, r), "Slack messages are signed too")
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
			require.NoError(t, json.Unmarshal(r.Body, &m), "%s", r.Body)
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
		ep, err := e.hooks.CreateEndpoint(ctx, webhookstest.Admin(), webhooks.EndpointInput{URL: &url,
			EventTypes: &[]record.EventType{record.EventTimedOut, record.EventDecided, record.EventTimedOut}})
		require.NoError(t, err)
		require.Equal(t, []record.EventType{record.EventDecided, record.EventTimedOut}, ep.EventTypes, "sorted, without duplicates")
		require.Equal(t, []string{}, ep.Namespaces)
		require.Equal(t, webhooks.FormatStandard, ep.Format)
		require.True(t, ep.Enabled)
		require.Nil(t, ep.DisabledReason)

		list, err := e.hooks.Endpoints(ctx, webhookstest.Admin())
		require.NoError(t, err)
		require.Len(t, list, 1)
		require.Equal(t, ep.ID, list[0].ID)
		require.Empty(t, list[0].Secret)

		desc, slack := "on-call", webhooks.FormatSlack
		changed, err := e.hooks.UpdateEndpoint(ctx, webhookstest.Admin(), ep.ID, webhooks.EndpointInput{
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
			_, err := e.hooks.CreateEndpoint(ctx, webhookstest.Admin(), in)
			webhookstest.RequireCode(t, services.CodeInvalid, err, name)
		}
		_, err = e.hooks.CreateEndpoint(ctx, e.operator, webhooks.EndpointInput{URL: &url, EventTypes: &[]record.EventType{record.EventTimedOut}})
		webhookstest.RequireCode(t, services.CodeForbidden, err)
		_, err = e.hooks.Endpoints(ctx, e.agent)
		webhookstest.RequireCode(t, services.CodeForbidden, err)

		_, err = e.hooks.SendTest(ctx, webhookstest.Admin(), ep.ID)
		require.NoError(t, err)
		require.NoError(t, e.hooks.DeleteEndpoint(ctx, webhookstest.Admin(), ep.ID))
		_, err = e.hooks.Endpoint(ctx, webhookstest.Admin(), ep.ID)
		webhookstest.RequireCode(t, services.CodeNotFound, err)
		webhookstest.RequireCode(t, services.CodeNotFound, e.hooks.DeleteEndpoint(ctx, webhookstest.Admin(), ep.ID))
		var n int
		require.NoError(t, st.Gorm().WithContext(ctx).Raw(`SELECT count(*) FROM webhook_deliveries`).Scan(&n).Error)
		require.Zero(t, n, "deleting an endpoint deletes its deliveries")
	})
}

// TestQueueStats: what /metrics reports about pending deliveries.
func TestQueueStats(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		ctx := context.Background()
		e := newHookEnv(t, st)
		ep := e.endpoint(t, webhookstest.EndpointOpts{URL: "http://127.0.0.1:9/"})
		queue := webhooks.QueueOf(st)
		q, err := queue(ctx)
		require.NoError(t, err)
		require.Equal(t, webhooks.QueueStats{}, q)
		_, err = e.hooks.SendTest(ctx, webhookstest.Admin(), ep.ID)
		require.NoError(t, err)
		time.Sleep(20 * time.Millisecond)
		q, err = queue(ctx)
		require.NoError(t, err)
		require.EqualValues(t, 1, q.Pending)
		require.Greater(t, q.OldestPendingAge, 10*time.Millisecond)
		require.Less(t, q.OldestPendingAge, time.Minute)

		_, err = e.hooks.UpdateEndpoint(ctx, webhookstest.Admin(), ep.ID, webhooks.EndpointInput{Enabled: new(false)})
		require.NoError(t, err)
		q, err = queue(ctx)
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
		slowEP := e.endpoint(t, webhookstest.EndpointOpts{URL: slow.URL})
		for range 20 {
			_, err := e.hooks.SendTest(ctx, webhookstest.Admin(), slowEP.ID)
			require.NoError(t, err)
		}
		time.Sleep(5 * time.Millisecond)
		fast := webhookstest.NewReceiver(t)
		fastEP := e.endpoint(t, webhookstest.EndpointOpts{URL: fast.URL})
		_, err := e.hooks.SendTest(ctx, webhookstest.Admin(), fastEP.ID)
		require.NoError(t, err)

		d := webhooks.NewDispatcher(st, slog.New(slog.DiscardHandler), webhooks.DispatcherConfig{Policy: webhooks.AddressPolicy{AllowPrivate: true},
			Poll: 10 * time.Millisecond, Workers: 4, PerEndpoint: 2})
		dctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { d.Run(dctx); close(done) }()
		t.Cleanup(func() { close(release); cancel(); <-done })

		start := time.Now()
		fast.WaitRequests(t, 1)
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
		require.NoError(t, st.GormWriter().WithContext(ctx).Exec(q).Error, q)
	}
	return func(endpointID string) int {
		t.Helper()
		var n *int // NULL before the first lease
		require.NoError(t, st.Gorm().WithContext(ctx).Raw(`SELECT max(leased) FROM lease_log WHERE endpoint_id = ?`, endpointID).Scan(&n).Error)
		if n == nil {
			return 0
		}
		return *n
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
		epA := e.endpoint(t, webhookstest.EndpointOpts{URL: a.srv.URL})
		epB := e.endpoint(t, webhookstest.EndpointOpts{URL: b.srv.URL})
		const each = 10
		for _, ep := range []string{epA.ID, epB.ID} {
			for range each {
				_, err := e.hooks.SendTest(ctx, webhookstest.Admin(), ep)
				require.NoError(t, err)
			}
		}
		maxLeased := logLeases(t, st)

		d := webhooks.NewDispatcher(st, slog.New(slog.DiscardHandler), webhooks.DispatcherConfig{Policy: webhooks.AddressPolicy{AllowPrivate: true},
			Poll: 10 * time.Millisecond, Workers: 5, PerEndpoint: 3})
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
