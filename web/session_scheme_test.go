package web_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/accounts"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
	"github.com/arbiter-ledger/arbiter/services/webhooks"
	"github.com/arbiter-ledger/arbiter/web"
)

// The public URL's scheme is read once, case-insensitively, for both HSTS
// and Secure cookies: "HTTPS://" turned HSTS on but left the session
// cookies without Secure, as the server's own flag compared "https://"
// exactly.
func TestPublicURLSchemeSetsHSTSAndSecureCookies(t *testing.T) {
	t.Parallel()
	st := dbtest.Open(t, services.SQLite)
	for _, c := range []struct {
		public string
		tls    bool
	}{{"HTTPS://Arbiter.example.com", true}, {"Https://arbiter.example.com/", true}, {"https://arbiter.example.com", true},
		{"HTTP://arbiter.internal", false}, {"", false}} {
		ledger := services.NewLedger(st, services.LedgerConfig{})
		h := web.New(web.Deps{Store: st, Ledger: ledger, Keys: accounts.NewKeys(st), Accounts: accounts.New(st),
			Webhooks: webhooks.New(st, webhooks.Config{Policy: webhooks.AddressPolicy{}}), Metrics: web.NewMetrics(st.CountByStatus, nil),
			Log: slog.New(slog.NewTextHandler(io.Discard, nil)), PublicURL: c.public,
			SecureCookies: strings.HasPrefix(c.public, "https://")}) // as the server computed it
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/signin", nil))
		require.Equal(t, http.StatusOK, rec.Code)
		res := http.Response{Header: rec.Header()}
		require.NotEmpty(t, res.Cookies(), c.public)
		for _, ck := range res.Cookies() {
			require.Equal(t, c.tls, ck.Secure, "%s: cookie %s", c.public, ck.Name)
			require.Equal(t, c.tls, strings.HasPrefix(ck.Name, "__Host-"), "%s: cookie %s", c.public, ck.Name)
		}
		require.Equal(t, c.tls, rec.Header().Get("Strict-Transport-Security") != "", c.public)
	}
}
