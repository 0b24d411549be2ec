package web_test

import (
	"context"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
)

// cutProxy forwards TCP to a PostgreSQL server until it is cut.
type cutProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	cut    bool
	conns  []net.Conn
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &cutProxy{ln: ln, target: target}
	t.Cleanup(func() { ln.Close(); p.setCut(true) })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			if p.cut {
				p.mu.Unlock()
				c.Close()
				continue
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				p.mu.Unlock()
				c.Close()
				continue
			}
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			go func() { io.Copy(up, c); up.Close() }()
			go func() { io.Copy(c, up); c.Close() }()
		}
	}()
	return p
}

// setCut drops every connection and refuses new ones, or lets them through.
func (p *cutProxy) setCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	if cut {
		for _, c := range p.conns {
			c.Close()
		}
		p.conns = nil
	}
}

// TestDatabaseOutage: while PostgreSQL is unreachable the API answers 503
// unavailable (never 500), and it recovers without a restart, with nothing
// acknowledged lost.
func TestDatabaseOutage(t *testing.T) {
	t.Parallel()
	direct := dbtest.MigratedPostgresURL(t)

	u, _ := url.Parse(direct)
	proxy := newCutProxy(t, u.Host)
	u.Host = proxy.ln.Addr().String()
	st, err := services.Open(context.Background(), u.String())
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	e := newEnv(t, st)
	agent := e.key("payments", "refund-bot", services.RoleAgent)

	status, _ := e.do("POST", "/v1/entries", agent, `{"key":"refund:before","type":"intent","tool":"payments.refund"}`)
	require.Equal(t, 201, status)

	proxy.setCut(true)
	for _, path := range []string{"/v1/entries", "/readyz"} {
		method, body := "POST", `{"key":"refund:during","type":"intent","tool":"payments.refund"}`
		if path == "/readyz" {
			method, body = "GET", ""
		}
		status, m := e.do(method, path, agent, body)
		require.Equal(t, 503, status, path)
		require.Equal(t, "unavailable", errCode(m), path)
	}
	// /metrics reads its gauges from the database: 503 too, never 500.
	status, raw := e.doRaw("GET", "/metrics", "", "")
	require.Equal(t, 503, status, "%s", raw)
	time.Sleep(1100 * time.Millisecond) // past the authentication cache
	status, m := e.do("GET", "/v1/actions?key=refund:before", agent, "")
	require.Equal(t, 503, status)
	require.Equal(t, "unavailable", errCode(m))

	proxy.setCut(false)
	require.Eventually(t, func() bool {
		status, _ := e.do("POST", "/v1/entries", agent, `{"key":"refund:after","type":"intent","tool":"payments.refund"}`)
		return status == 201
	}, 10*time.Second, 50*time.Millisecond, "recovers without a restart")
	status, m = e.do("GET", "/v1/actions?key=refund:before", agent, "")
	require.Equal(t, 200, status)
	require.Equal(t, "in_progress", m["status"])
	require.NotContains(t, e.log.String(), "status=500")
}
