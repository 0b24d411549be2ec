package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/arbiter-ledger/arbiter/services/accounts"
	"github.com/arbiter-ledger/arbiter/services/webhooks"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
	"github.com/arbiter-ledger/arbiter/services/evidence"
	"github.com/arbiter-ledger/arbiter/services/record"
	"github.com/arbiter-ledger/arbiter/web"
)

// FuzzEntriesHandler posts arbitrary bodies to /v1/entries with an agent key
// on SQLite: whatever arrives, the answer is never a 5xx and always a JSON
// body. The database lives for the whole run, so inputs act on the actions
// earlier inputs created, as a misbehaving agent's requests would.
func FuzzEntriesHandler(f *testing.F) {
	st := dbtest.Open(f, services.SQLite)
	logs := &lockedBuffer{}
	ledger := services.NewLedger(st, services.LedgerConfig{})
	keys := accounts.NewKeys(st)
	h := web.New(web.Deps{Store: st, Evidence: evidence.NewLog(st.Driver(), dbtest.LogKey(f)), Ledger: ledger, Keys: keys, Accounts: accounts.New(st),
		Webhooks: webhooks.New(st, webhooks.Config{Policy: webhooks.AddressPolicy{}}), Metrics: web.NewMetrics(st.CountByStatus, nil),
		Log: slog.New(slog.NewTextHandler(logs, nil))})
	_, secret, err := keys.CreateKey(context.Background(), accounts.CreateKeyRequest{Namespace: "fuzz", Name: "fuzzer", Role: services.RoleAgent})
	require.NoError(f, err)

	f.Fuzz(func(t *testing.T, body []byte) {
		logs.reset()
		req := httptest.NewRequest("POST", "/v1/entries", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+secret)
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		require.Less(t, rec.Code, http.StatusInternalServerError, "body %q answered %d %s\nlogs:\n%s", body, rec.Code, rec.Body, logs)
		require.True(t, json.Valid(rec.Body.Bytes()), "not JSON: %s", rec.Body)
		if rec.Code >= 400 {
			var e struct {
				Outcome record.Outcome
				Error   *struct{ Code string } `json:"error"`
			}
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &e))
			if rec.Code == http.StatusConflict && (e.Outcome == record.OutcomeInProgress || e.Outcome == record.OutcomeHeld) {
				return // a 409 outcome, not an error
			}
			require.NotNil(t, e.Error, "an error answer names its code: %s", rec.Body)
			require.NotEmpty(t, e.Error.Code, "%s", rec.Body)
		}
	})
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.Reset()
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
