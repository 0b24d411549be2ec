package web_test

import (
	"encoding/json"
	"log/slog"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/arbiter-ledger/arbiter/services/policies"

	"github.com/arbiter-ledger/arbiter/services/accounts"
	"github.com/arbiter-ledger/arbiter/services/webhooks"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
	"github.com/arbiter-ledger/arbiter/services/evidence"
	"github.com/arbiter-ledger/arbiter/web"
)

// TestOpenAPICoversRoutes fails when a route is undocumented or a documented
// route does not exist.
func TestOpenAPICoversRoutes(t *testing.T) {
	t.Parallel()
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	require.NoError(t, json.Unmarshal(web.OpenAPI, &doc))
	require.True(t, strings.HasPrefix(doc.OpenAPI, "3.1"), "OpenAPI 3.1, got %q", doc.OpenAPI)
	param := regexp.MustCompile(`\{([^}]+)\}`)
	documented := []string{}
	for path, ops := range doc.Paths {
		for method, op := range ops {
			switch method {
			case "get", "post", "put", "patch", "delete":
			default:
				continue
			}
			var o struct {
				OperationID string `json:"operationId"`
			}
			require.NoError(t, json.Unmarshal(op, &o))
			require.NotEmpty(t, o.OperationID, "%s %s has an operationId", method, path)
			documented = append(documented, strings.ToUpper(method)+" "+param.ReplaceAllString(path, ":$1"))
		}
	}
	st := dbtest.Open(t, services.SQLite)
	approvals := policies.New(st)
	ledger, freezes, breakers := policies.NewBraked(st, services.LedgerConfig{Approver: approvals}, nil)
	e := web.New(web.Deps{Store: st, Evidence: evidence.NewLog(st.Driver(), dbtest.LogKey(t)), Ledger: ledger, Keys: accounts.NewKeys(st), Accounts: accounts.New(st), Webhooks: webhooks.New(st, webhooks.Config{Policy: webhooks.AddressPolicy{}}), Policies: approvals, Limits: policies.NewLimits(st),
		Freezes: freezes, Breakers: breakers, Metrics: web.NewMetrics(st.CountByStatus, nil), Log: slog.New(slog.DiscardHandler)})
	served := []string{}
	for _, r := range e.Routes() {
		if r.Method == "echo_route_any" || strings.HasSuffix(r.Path, "/*") || !apiRoute(r.Path) {
			continue
		}
		served = append(served, r.Method+" "+r.Path)
	}
	sort.Strings(documented)
	sort.Strings(served)
	require.Equal(t, served, documented)
}

// TestOpenAPIServed: the running service serves the document it embeds.
func TestOpenAPIServed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, dbtest.Open(t, services.SQLite))
	status, raw := e.doRaw("GET", "/v1/openapi.json", "", "")
	require.Equal(t, 200, status)
	require.JSONEq(t, string(web.OpenAPI), string(raw))
}

// apiRoute tells the JSON API and the probes from the dashboard's pages.
func apiRoute(path string) bool {
	for _, p := range []string{"/v1/", "/healthz", "/readyz", "/metrics"} {
		if strings.HasPrefix(path, p) {
			return true
		}
	}
	return false
}
