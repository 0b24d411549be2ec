package client_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/arbiter-ledger/arbiter/services/accounts"
	"github.com/arbiter-ledger/arbiter/services/policies"
	"github.com/arbiter-ledger/arbiter/services/webhooks"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/client"
	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
	"github.com/arbiter-ledger/arbiter/services/evidence"
	"github.com/arbiter-ledger/arbiter/web"
)

// env is a real Arbiter server on a fresh database, reached through a TCP
// proxy that the test can cut and restore, as if the server restarted or the
// network failed.
type env struct {
	t      *testing.T
	st     *services.Store
	ledger *services.Ledger
	proxy  *proxy

	mu  sync.Mutex
	srv *httptest.Server
}

func newEnv(t *testing.T, st *services.Store) *env {
	t.Helper()
	e := &env{t: t, st: st, ledger: services.NewLedger(st, services.LedgerConfig{})}
	e.srv = e.startServer()
	e.proxy = startProxy(t, e.srv.Listener.Addr().String())
	t.Cleanup(func() {
		e.proxy.close()
		e.mu.Lock()
		defer e.mu.Unlock()
		e.srv.Close()
	})
	return e
}

func (e *env) startServer() *httptest.Server {
	st := e.st
	approvals, limits := policies.New(st), policies.NewLimits(st)
	ledger, freezes, breakers := policies.NewBraked(st, services.LedgerConfig{Approver: approvals, Limiter: limits}, nil)
	h := web.New(web.Deps{Store: st, Evidence: evidence.NewLog(st.Driver(), dbtest.LogKey(e.t)), Ledger: ledger, Keys: accounts.NewKeys(st),
		Accounts: accounts.New(st), Webhooks: webhooks.New(st, webhooks.Config{Policy: webhooks.AddressPolicy{AllowPrivate: true}}),
		Policies: approvals, Limits: limits, Freezes: freezes, Breakers: breakers, Metrics: web.NewMetrics(nil, nil), Log: slog.New(slog.DiscardHandler)})
	return httptest.NewServer(h)
}

// restartServer stops the server and starts a new one on the same database
// behind the same address; requests in between find nothing listening.
func (e *env) restartServer(down time.Duration) {
	e.proxy.cut()
	e.mu.Lock()
	e.srv.Close()
	e.mu.Unlock()
	time.Sleep(down)
	srv := e.startServer()
	e.mu.Lock()
	e.srv = srv
	e.mu.Unlock()
	e.proxy.restore(srv.Listener.Addr().String())
}

// URL is the server's address through the proxy.
func (e *env) URL() string { return "http://" + e.proxy.addr }

// key creates an API key and returns its secret.
func (e *env) key(ns, name string, role services.Role) string {
	e.t.Helper()
	_, secret, err := accounts.NewKeys(e.st).CreateKey(context.Background(), accounts.CreateKeyRequest{Namespace: ns, Name: name, Role: role})
	require.NoError(e.t, err)
	return secret
}

// client returns a client for key with fast retries, so tests of outages
// take seconds.
func (e *env) client(key string, opts ...client.Option) *client.Client {
	base := []client.Option{client.WithBackoff(20*time.Millisecond, 300*time.Millisecond),
		client.WithReportBudget(20 * time.Second), client.WithTimeout(10 * time.Second),
		// A transport of its own, so that a test's cut connections are not
		// reused by another test's client.
		client.WithHTTPClient(&http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()})}
	return client.New(e.URL(), key, append(base, opts...)...)
}

// agent returns a client with a new agent key of namespace ns.
func (e *env) agent(ns string, opts ...client.Option) *client.Client {
	return e.client(e.key(ns, "agent-"+ns, services.RoleAgent), opts...)
}

// operator returns a client with a new operator key of namespace ns,
// owned by the person oncall-NS@example.com, so its approvals count.
func (e *env) operator(ns string) *client.Client {
	e.t.Helper()
	ctx, owner := context.Background(), "oncall-"+ns+"@example.com"
	if _, err := accounts.New(e.st).UserByEmail(ctx, owner); err != nil {
		_, err := accounts.New(e.st).CreateUser(ctx, owner, services.RoleOperator, "correct horse battery staple")
		require.NoError(e.t, err)
	}
	_, secret, err := accounts.NewKeys(e.st).CreateKey(ctx, accounts.CreateKeyRequest{Namespace: ns, Name: "oncall-" + ns,
		Role: services.RoleOperator, Owner: owner})
	require.NoError(e.t, err)
	return e.client(secret)
}

// sweep times out the actions whose lease has passed, as the server's
// sweeper does every second.
func (e *env) sweep() int {
	e.t.Helper()
	n, err := e.ledger.Sweep(context.Background())
	require.NoError(e.t, err)
	return n
}

// timeline returns the entry types of the action with key, oldest first.
func timeline(t *testing.T, c *client.Client, key string) ([]string, []client.LedgerEntry) {
	t.Helper()
	ctx := context.Background()
	a, err := c.ActionByKey(ctx, key)
	require.NoError(t, err)
	entries, err := c.Entries(ctx, a.ID)
	require.NoError(t, err)
	types := make([]string, len(entries))
	for i, en := range entries {
		types[i] = en.Type
	}
	return types, entries
}

// count returns how many times typ occurs in types.
func count(types []string, typ string) int {
	n := 0
	for _, t := range types {
		if t == typ {
			n++
		}
	}
	return n
}

// proxy forwards TCP connections to a target. cut closes the listener and
// every open connection (new connections are refused); restore listens on
// the same address again, possibly forwarding to a new target.
type proxy struct {
	t    *testing.T
	addr string

	mu     sync.Mutex
	target string
	ln     net.Listener
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

func startProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &proxy{t: t, addr: ln.Addr().String(), target: target, conns: map[net.Conn]struct{}{}}
	p.serve(ln)
	return p
}

func (p *proxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			target := p.target
			p.mu.Unlock()
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			if !p.track(c, up) {
				continue
			}
			p.wg.Add(2)
			go p.pipe(c, up)
			go p.pipe(up, c)
		}
	}()
}

// track registers a connection pair, unless the proxy was cut meanwhile.
func (p *proxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln == nil {
		for _, c := range conns {
			c.Close()
		}
		return false
	}
	for _, c := range conns {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	_, _ = io.Copy(dst, src)
	dst.Close()
	src.Close()
}

// cut stops accepting and breaks every open connection.
func (p *proxy) cut() {
	p.mu.Lock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
	p.mu.Unlock()
}

// restore listens again on the same address, forwarding to target ("" keeps
// the old one).
func (p *proxy) restore(target string) {
	p.t.Helper()
	p.mu.Lock()
	if target != "" {
		p.target = target
	}
	p.mu.Unlock()
	var ln net.Listener
	var err error
	for range 50 {
		if ln, err = net.Listen("tcp", p.addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		p.t.Errorf("proxy: listen again on %s: %v", p.addr, err)
		return
	}
	p.serve(ln)
}

func (p *proxy) close() {
	p.cut()
	p.wg.Wait()
}

// recorder is an http.RoundTripper that lets a test watch, fail or drop
// requests of one client.
type recorder struct {
	next http.RoundTripper

	mu    sync.Mutex
	calls []call
	// drop, when it returns true for a request, sends the request but
	// loses its answer, as a network failure after the server acted would.
	drop func(method, path string, body []byte) bool
	// after runs once a request was answered, before the answer is returned.
	after func(method, path string)
}

type call struct {
	Method, Path string
	Body         string
	Err          error
	Status       int
}

var errAnswerLost = errors.New("test: the answer was lost on the way back")

func newRecorder() *recorder {
	return &recorder{next: http.DefaultTransport.(*http.Transport).Clone()}
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		body, _ = io.ReadAll(req.Body)
		req.Body.Close()
		req.Body = io.NopCloser(bytes.NewReader(body))
	}
	res, err := r.next.RoundTrip(req)
	r.mu.Lock()
	drop, after := r.drop, r.after
	r.mu.Unlock()
	if err == nil && drop != nil && drop(req.Method, req.URL.Path, body) {
		res.Body.Close()
		res, err = nil, errAnswerLost
	}
	c := call{Method: req.Method, Path: req.URL.Path, Body: string(body), Err: err}
	if res != nil {
		c.Status = res.StatusCode
	}
	r.mu.Lock()
	r.calls = append(r.calls, c)
	r.mu.Unlock()
	if after != nil {
		after(req.Method, req.URL.Path)
	}
	return res, err
}

// entries returns the recorded POST /v1/entries calls whose body contains
// every one of the fragments.
func (r *recorder) entries(fragments ...string) []call {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []call
	for _, c := range r.calls {
		if c.Method != http.MethodPost || c.Path != "/v1/entries" {
			continue
		}
		ok := true
		for _, f := range fragments {
			ok = ok && strings.Contains(c.Body, f)
		}
		if ok {
			out = append(out, c)
		}
	}
	return out
}
