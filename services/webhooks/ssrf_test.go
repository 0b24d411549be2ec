package webhooks_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/arbiter-ledger/arbiter/services/webhooks"
	"github.com/arbiter-ledger/arbiter/services/webhooks/webhookstest"

	"github.com/arbiter-ledger/arbiter/services/record"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
)

// Server-side request forgery: webhook URLs reach only public addresses
// unless private ones are allowed, checked on the resolved address at
// creation and again on the address dialled at every send.

// fakeDNS answers host lookups from a table the test can change.
type fakeDNS struct {
	mu    sync.Mutex
	hosts map[string][]string
}

func newFakeDNS(hosts map[string][]string) *fakeDNS { return &fakeDNS{hosts: hosts} }

func (r *fakeDNS) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ips, ok := r.hosts[host]
	if !ok {
		return nil, fmt.Errorf("lookup %s: no such host", host)
	}
	out := make([]netip.Addr, len(ips))
	for i, ip := range ips {
		out[i] = netip.MustParseAddr(ip)
	}
	return out, nil
}

func (r *fakeDNS) set(host string, ips ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hosts[host] = ips
}

// TestPrivateAddressesAreRefusedAtCreation: by default an endpoint URL must
// be http(s) without credentials and reach only public addresses, whatever
// its host resolves to.
func TestPrivateAddressesAreRefusedAtCreation(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		ctx := context.Background()
		dns := newFakeDNS(map[string][]string{
			"public.example":   {"93.184.216.34"},
			"internal.example": {"127.0.0.1"},
			"mixed.example":    {"93.184.216.34", "10.1.2.3"},
			"metadata.example": {"169.254.169.254"},
			"v6.example":       {"::1"},
		})
		strict := webhooks.New(st, webhooks.Config{Policy: webhooks.AddressPolicy{Resolver: dns}})
		create := func(w *webhooks.Webhooks, u string) error {
			_, err := w.CreateEndpoint(ctx, webhookstest.Admin(), webhooks.EndpointInput{URL: &u, EventTypes: &[]record.EventType{record.EventTimedOut}})
			return err
		}
		for _, u := range []string{
			"http://127.0.0.1/hook", "http://127.0.0.1:8080/", "http://[::1]/", "http://10.0.0.1/",
			"http://169.254.169.254/latest/meta-data/", "http://localhost/", "http://LOCALHOST:9/",
			"http://api.localhost/", "http://0.0.0.0/", "http://[::ffff:127.0.0.1]/", "http://[fd00::1]/",
			"http://192.168.1.1/", "http://172.16.0.1/", "http://100.64.0.1/", "http://[fe80::1]/",
			"http://internal.example/hook", "http://mixed.example/", "http://metadata.example/",
			"http://v6.example/", "http://unknown.example/",
			"ftp://public.example/", "file:///etc/passwd", "javascript:alert(1)", "public.example/hook", "",
			"http://user:pass@public.example/", "https://token@public.example/",
		} {
			webhookstest.RequireCode(t, services.CodeInvalid, create(strict, u), u)
		}
		for _, u := range []string{"https://public.example/hook", "http://93.184.216.34:8080/x", "http://[2606:2800:220:1::1]/"} {
			require.NoError(t, create(strict, u), u)
		}

		ep, err := strict.CreateEndpoint(ctx, webhookstest.Admin(), webhooks.EndpointInput{URL: new("https://public.example/"), EventTypes: &[]record.EventType{record.EventTimedOut}})
		require.NoError(t, err)
		_, err = strict.UpdateEndpoint(ctx, webhookstest.Admin(), ep.ID, webhooks.EndpointInput{URL: new("http://internal.example/")})
		webhookstest.RequireCode(t, services.CodeInvalid, err, "changing the URL is checked too")

		open := webhooks.New(st, webhooks.Config{Policy: webhooks.AddressPolicy{AllowPrivate: true, Resolver: dns}})
		for _, u := range []string{"http://127.0.0.1/hook", "http://localhost:9/", "http://internal.example/", "http://10.0.0.1/"} {
			require.NoError(t, create(open, u), "allowed with AllowPrivate: %s", u)
		}
		for _, u := range []string{"ftp://public.example/", "http://user:pass@127.0.0.1/"} {
			webhookstest.RequireCode(t, services.CodeInvalid, create(open, u), "AllowPrivate allows addresses, not schemes or credentials: %s", u)
		}
	})
}

// TestRebindingIsRefusedAtSendTime: a host that resolved to a public address
// when the endpoint was saved and to 127.0.0.1 when it is sent to is not
// connected to; the attempt records why. With private addresses allowed the
// same receiver is reached.
func TestRebindingIsRefusedAtSendTime(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		ctx := context.Background()
		e := newHookEnv(t, st)
		dns := newFakeDNS(map[string][]string{"hooks.example": {"93.184.216.34"}})
		strict := webhooks.AddressPolicy{Resolver: dns}
		e.hooks = webhooks.New(st, webhooks.Config{Policy: strict})
		rcv := webhookstest.NewReceiver(t)
		port := must(url.Parse(rcv.URL)).Port()
		ep := e.endpoint(t, webhookstest.EndpointOpts{URL: "http://hooks.example:" + port + "/hook"})

		dns.set("hooks.example", "127.0.0.1")
		e.timeOut(t, "k1")
		dctx, stop := context.WithCancel(ctx)
		d := webhooks.NewDispatcher(st, slog.New(slog.DiscardHandler), webhooks.DispatcherConfig{Policy: strict, Poll: 10 * time.Millisecond})
		done := make(chan struct{})
		go func() { d.Run(dctx); close(done) }()
		got := e.waitDelivery(t, ep.ID, func(d *webhooks.Delivery) bool { return d.AttemptCount > 0 })
		stop()
		<-done
		require.Equal(t, webhooks.DeliveryPending, got.State, "retried later, as any network error")
		require.Len(t, got.Attempts, 1)
		a := got.Attempts[0]
		require.Nil(t, a.StatusCode)
		require.Contains(t, *a.Error, "refusing to connect to hooks.example: it resolves to a loopback address (127.0.0.1)")
		require.Empty(t, rcv.Got(), "nothing reached the receiver")

		webhookstest.StartDispatcher(t, st, webhookstest.DispatcherOpts{Policy: &webhooks.AddressPolicy{AllowPrivate: true, Resolver: dns}})
		e.timeOut(t, "k2")
		r := rcv.WaitRequests(t, 1)[0]
		require.NoError(t, webhookstest.Verify(ep.Secret, r))
		require.Equal(t, "k2", webhookstest.MessageOf(t, r).Data.Action.Key)
	})
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
