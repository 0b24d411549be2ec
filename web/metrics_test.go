package web_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
)

func TestMetrics(t *testing.T) {
	t.Parallel()
	e := newEnv(t, dbtest.Open(t, services.SQLite))
	agent := e.key("payments", "refund-bot", services.RoleAgent)
	e.do("POST", "/v1/entries", agent, `{"key":"a","type":"intent","tool":"t"}`)
	e.do("POST", "/v1/entries", agent, `{"key":"a","type":"intent","tool":"t"}`)
	e.do("POST", "/v1/entries", agent, `{"key":"b","type":"intent","tool":"t"}`)
	e.do("POST", "/v1/entries", agent, `{"key":"b","type":"succeeded","attempt":1}`)
	status, raw := e.doRaw("GET", "/metrics", "", "")
	require.Equal(t, 200, status)
	body := string(raw)
	for _, want := range []string{
		`arbiter_entries_total{outcome="proceed",type="intent"} 2`,
		`arbiter_entries_total{outcome="in_progress",type="intent"} 1`,
		`arbiter_entries_total{outcome="recorded",type="succeeded"} 1`,
		`arbiter_actions{status="in_progress"} 1`,
		`arbiter_actions{status="succeeded"} 1`,
		`arbiter_actions{status="timed_out"} 0`,
		`arbiter_http_request_duration_seconds_count{code="201",method="POST",route="/v1/entries"} 2`,
		`arbiter_sweeper_runs_total`,
		// One after another, each request is a group of its own.
		`arbiter_ledger_group_entries_sum 4`,
		`arbiter_ledger_group_entries_bucket{le="1"} 4`,
	} {
		require.Contains(t, body, want)
	}
}
