package web_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
)

// sendWholeBody is a client as Python's urllib is one: it writes the whole
// request, at about bytesPerSecond, before it reads anything, and returns
// the answer's status and headers. A reset connection fails the test.
func sendWholeBody(t *testing.T, addr, path, key string, size, bytesPerSecond int, chunked bool) *http.Response {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	require.NoError(t, conn.SetDeadline(time.Now().Add(30*time.Second)))
	head := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\n", path, addr, key)
	if chunked {
		head += "Transfer-Encoding: chunked\r\n\r\n"
	} else {
		head += fmt.Sprintf("Content-Length: %d\r\n\r\n", size)
	}
	_, err = conn.Write([]byte(head))
	require.NoError(t, err)
	const piece = 64 << 10
	chunk := []byte(`{"key":"` + strings.Repeat("x", piece) + `"}`)[:piece]
	for sent := 0; sent < size; sent += piece {
		p := chunk[:min(piece, size-sent)]
		if chunked {
			_, err = fmt.Fprintf(conn, "%x\r\n%s\r\n", len(p), p)
		} else {
			_, err = conn.Write(p)
		}
		require.NoError(t, err, "writing the body after %d bytes", sent)
		if bytesPerSecond > 0 {
			time.Sleep(time.Duration(len(p)) * time.Second / time.Duration(bytesPerSecond))
		}
	}
	if chunked {
		_, err = conn.Write([]byte("0\r\n\r\n"))
		require.NoError(t, err, "ending the chunked body")
	}
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err, "reading the answer (a reset connection instead of a 413)")
	res.Body.Close()
	return res
}

// A body over the limit is answered 413 and the client sees that answer,
// not a reset connection, even when it writes the whole body before it
// reads (as Python's urllib does); the connection is closed after it.
func TestBodyOverLimitAnswerReachesClient(t *testing.T) {
	t.Parallel()
	e := newEnv(t, dbtest.Open(t, services.SQLite))
	agent := e.key("ns", "agent", services.RoleAgent)
	addr := strings.TrimPrefix(e.srv.URL, "http://")
	for _, c := range []struct {
		name    string
		size    int
		rate    int
		chunked bool
	}{
		{"1.1 MB at 2 MB/s", 1100 << 10, 2 << 20, false},
		{"4 MB at full speed", 4 << 20, 0, false},
		{"4 MB at full speed, chunked", 4 << 20, 0, true},
		{"1.1 MB at 2 MB/s, chunked", 1100 << 10, 2 << 20, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			for range 3 {
				res := sendWholeBody(t, addr, "/v1/entries", agent, c.size, c.rate, c.chunked)
				require.Equal(t, http.StatusRequestEntityTooLarge, res.StatusCode)
				require.True(t, res.Close, "the 413 closes the connection (Connection: close)")
			}
		})
	}
}
