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

// A filter may name at most services.MaxFilterValues values of one parameter:
// 40,000 repeated status filters were a 500 on SQLite ("too many SQL
// variables") before Go refused more than 10,000 query parameters, and are
// now silently dropped by that refusal, which listed every action as if no
// filter were given. Both databases refuse them with 400, as they do
// 9,000 repeats, 40,000 values in one parameter, and 40,000 statuses in a
// bulk filter; a few repeats of the same status still list.
func TestTooManyFilterValuesAreRefused(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		op := e.key("ns", "op", services.RoleOperator)
		admin := e.admin("root@example.com")
		for name, query := range map[string]string{
			"40,000 repeats":          strings.Repeat("status=timed_out&", 40000) + "limit=5",
			"9,000 repeats":           strings.Repeat("status=timed_out&", 9000) + "limit=5",
			"101 repeats of tool":     strings.Repeat("tool=a&", services.MaxFilterValues+1) + "limit=5",
			"40,000 values in one":    "status=" + strings.TrimSuffix(strings.Repeat("failed,", 40000), ","),
			"101 values, some repeat": "status=" + strings.TrimSuffix(strings.Repeat("failed,", services.MaxFilterValues+1), ","),
		} {
			status, m := e.do("GET", "/v1/actions?"+query, op, "")
			require.Equal(t, http.StatusBadRequest, status, "%s: %v", name, m)
			require.Equal(t, "invalid", errCode(m), name)
			page := admin.get("/actions?" + query)
			require.Equal(t, http.StatusBadRequest, page.status, "the dashboard's list, %s", name)
		}

		query := strings.Repeat("status=timed_out&", services.MaxFilterValues-1) + "status=failed"
		status, m := e.do("GET", "/v1/actions?"+query, op, "")
		require.Equal(t, http.StatusOK, status, "%v", m)
		require.Empty(t, m["actions"])
		require.Equal(t, http.StatusOK, admin.get("/actions?"+query).status)

		// The bulk filter, in a body: as many statuses as fit in 1 MiB.
		statuses := `"timed_out"` + strings.Repeat(`,"timed_out"`, 40000)
		status, m = e.do("POST", "/v1/decisions", op, `{"filter":{"status":[`+statuses+`]},"decision":"abandon","reason":"r","dry_run":true}`)
		require.Equal(t, http.StatusBadRequest, status, "%v", m)
		require.Equal(t, "invalid", errCode(m))
	})
}
