package main

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestClientThatDoesNotReadIsDropped: a client that sends a request and
// never reads its large answer has its connection closed once the write
// timeout passes, and the handler's write fails, so the answer's memory is
// let go instead of being held as long as the socket stays open.
func TestClientThatDoesNotReadIsDropped(t *testing.T) {
	t.Parallel()
	const bound = time.Second
	failed := make(chan time.Time, 1)
	chunk := bytes.Repeat([]byte("x"), 64<<10)
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for range 1024 { // 64 MiB: far more than the sockets' buffers
			if _, err := w.Write(chunk); err != nil {
				failed <- time.Now()
				return
			}
		}
		failed <- time.Time{}
	})
	srv := apiServer(handler, slog.New(slog.NewTextHandler(io.Discard, nil)), bound)
	closed := make(chan time.Time, 1)
	srv.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateClosed {
			closed <- time.Now()
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	conn, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.(*net.TCPConn).SetReadBuffer(4096))
	sent := time.Now()
	fmt.Fprintf(conn, "GET /v1/actions HTTP/1.1\r\nHost: x\r\n\r\n")

	select {
	case at := <-failed:
		require.False(t, at.IsZero(), "the whole answer was written to a client that reads nothing")
		took := at.Sub(sent)
		t.Logf("the write failed %v after the request", took.Round(time.Millisecond))
		require.GreaterOrEqual(t, took, bound-50*time.Millisecond)
		require.Less(t, took, bound+time.Second)
	case <-time.After(bound + 5*time.Second):
		t.Fatal("the write to a client that reads nothing did not fail")
	}
	// The server closed the connection: what the kernel still buffers is
	// no longer the process's.
	select {
	case at := <-closed:
		require.Less(t, at.Sub(sent), bound+time.Second)
	case <-time.After(5 * time.Second):
		t.Fatal("the connection of a client that reads nothing stays open")
	}
}
