package web_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/accounts"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
	"github.com/arbiter-ledger/arbiter/services/webhooks"
	"github.com/arbiter-ledger/arbiter/web"
)

// Log lines cut what a client sent (the path, the request id, an error
// that quotes the request) at 1 KiB: a 600 KB path or request id made a
// 600 KB line per anonymous request. A request id is echoed back only when
// it is at most 128 printable ASCII characters; any other is replaced by a
// new one, so the answer's header stays one that every client can parse.
func TestLogsCutClientValues(t *testing.T) {
	t.Parallel()
	st := dbtest.Open(t, services.SQLite)
	logs := &lockedBuffer{} // the server logs after it answered
	ledger := services.NewLedger(st, services.LedgerConfig{})
	srv := httptest.NewServer(web.New(web.Deps{Store: st, Ledger: ledger, Keys: accounts.NewKeys(st), Accounts: accounts.New(st),
		Webhooks: webhooks.New(st, webhooks.Config{Policy: webhooks.AddressPolicy{}}), Metrics: web.NewMetrics(st.CountByStatus, nil),
		Log: slog.New(slog.NewTextHandler(logs, nil))}))
	t.Cleanup(srv.Close)
	e := &env{t: t, srv: srv, st: st}
	reader := e.key("ns", "reader", services.RoleReader)
	huge := strings.Repeat("a", 400<<10) // path and id within the 1 MB of headers
	send := func(path, id string) *http.Response {
		t.Helper()
		req, err := http.NewRequest("GET", e.srv.URL+path, nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+reader)
		if id != "" {
			req.Header.Set(echo.HeaderXRequestID, id)
		}
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		res.Body.Close()
		return res
	}

	res := send("/no/such/"+huge, huge)
	require.Equal(t, http.StatusNotFound, res.StatusCode)
	got := res.Header.Get(echo.HeaderXRequestID)
	require.NotEmpty(t, got, "a new request id")
	require.LessOrEqual(t, len(got), 128)
	res = send("/v1/actions?"+huge+"=1", "")
	require.Equal(t, http.StatusBadRequest, res.StatusCode)
	require.Eventually(t, func() bool { return strings.Count(logs.String(), "\n") >= 2 }, 5*time.Second, 10*time.Millisecond)
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		require.Less(t, len(line), 4<<10, "a log line of %d bytes: %.300s…", len(line), line)
	}
	require.Contains(t, logs.String(), "/no/such/aaaa", "the path's start is logged")

	for _, c := range []struct {
		id   string
		echo bool
	}{
		{"req-42.abc_DEF:9/x", true},
		{strings.Repeat("b", 128), true},
		{strings.Repeat("b", 129), false},
		{"with space", false},
		{"caf\u00e9", false},
		{"tab\there", false},
	} {
		got := send("/v1/actions", c.id).Header.Get(echo.HeaderXRequestID)
		require.NotEmpty(t, got, "%q", c.id)
		if c.echo {
			require.Equal(t, c.id, got)
		} else {
			require.NotEqual(t, c.id, got, "%q is replaced", c.id)
			require.LessOrEqual(t, len(got), 128)
		}
	}
}
