package main_test

import (
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
)

// benchReport is the JSON `arbiter bench --json` prints for a load run.
type benchReport struct {
	URL               string  `json:"url"`
	Concurrency       int     `json:"concurrency"`
	Batch             int     `json:"batch"`
	Mix               string  `json:"mix"`
	Seconds           float64 `json:"seconds"`
	Requests          int     `json:"requests"`
	Entries           int     `json:"entries"`
	EntriesPerSecond  float64 `json:"entries_per_second"`
	RequestsPerSecond float64 `json:"requests_per_second"`
	Latency           struct {
		Count              int
		P50, P95, P99, Max float64
	} `json:"latency_ms"`
	LatencyByKind map[string]json.RawMessage `json:"latency_by_kind_ms"`
	Outcomes      map[string]int             `json:"outcomes"`
	Errors        map[string]int             `json:"errors"`
}

func TestBenchLoadsAServer(t *testing.T) {
	t.Parallel()
	for _, d := range dbtest.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			dbURL := dbtest.SQLiteURL(t)
			if d == services.Postgres {
				dbURL = dbtest.PostgresURL(t)
			}
			env := []string{"ARBITER_DATABASE_URL=" + dbURL, "ARBITER_AUTO_MIGRATE=true"}
			p := serve(t, dir, env)
			waitReady(t, p.url, 10*time.Second)

			// Single entries with every kind in the mix; the key is made by
			// the bench itself.
			out, stderr, err := runArbiter(t, dir, env, "", "bench", "--url", p.url, "--create-key", "--duration", "1s",
				"--concurrency", "4", "--mix", "intent=50,outcome=30,heartbeat=10,replay=10", "--json")
			require.NoError(t, err, stderr)
			var r benchReport
			require.NoError(t, json.Unmarshal([]byte(out), &r), out)
			require.Equal(t, p.url, r.URL)
			require.Equal(t, 4, r.Concurrency)
			require.Equal(t, 1, r.Batch)
			require.Equal(t, "intent=50,outcome=30,heartbeat=10,replay=10", r.Mix)
			require.InDelta(t, 1.0, r.Seconds, 0.5)
			require.Positive(t, r.Entries)
			require.Equal(t, r.Requests, r.Entries, "one entry per request")
			require.Empty(t, r.Errors)
			require.Positive(t, r.Outcomes["proceed"])
			require.Positive(t, r.Outcomes["recorded"], "outcomes and heartbeats for started keys")
			require.InDelta(t, float64(r.Entries)/r.Seconds, r.EntriesPerSecond, 0.01)
			require.Equal(t, r.Requests, r.Latency.Count)
			require.Positive(t, r.Latency.P50)
			require.LessOrEqual(t, r.Latency.P50, r.Latency.P95)
			require.LessOrEqual(t, r.Latency.P95, r.Latency.P99)
			require.LessOrEqual(t, r.Latency.P99, r.Latency.Max)
			require.Contains(t, r.LatencyByKind, "intent")

			// Batches, with a key from `arbiter keys create`.
			key := createKey(t, dir, env, "--namespace", "bench", "--name", "batcher", "--role", "agent")
			out, stderr, err = runArbiter(t, dir, []string{"ARBITER_API_KEY=" + key}, "", "bench", "--url", p.url,
				"--duration", "1s", "--concurrency", "2", "--batch", "20", "--json")
			require.NoError(t, err, stderr)
			r = benchReport{}
			require.NoError(t, json.Unmarshal([]byte(out), &r), out)
			require.Equal(t, 20, r.Batch)
			require.Positive(t, r.Requests)
			require.Equal(t, 20*r.Requests, r.Entries)
			require.Empty(t, r.Errors)
			require.Empty(t, r.LatencyByKind, "kinds are timed on single-entry requests only")
		})
	}
}

func TestBenchRefusesBadInput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	env := []string{"ARBITER_DATABASE_URL=" + dbtest.SQLiteURL(t)}
	p := serve(t, dir, env)
	waitReady(t, p.url, 10*time.Second)

	_, stderr, err := runArbiter(t, dir, nil, "", "bench", "--url", p.url, "--api-key", "ak_x", "--mix", "intent=1,bogus=2")
	require.Error(t, err)
	require.Contains(t, stderr, `--mix "intent=1,bogus=2"`)

	_, stderr, err = runArbiter(t, dir, nil, "", "bench", "--url", "https://127.0.0.1:1", "--api-key", "ak_x")
	require.Error(t, err)
	require.Contains(t, stderr, "want http://host:port")

	_, stderr, err = runArbiter(t, dir, nil, "", "bench", "--url", p.url, "--api-key", "ak_wrong", "--duration", "1s")
	require.Error(t, err)
	require.Contains(t, stderr, "refused the API key with 401")

	_, stderr, err = runArbiter(t, dir, []string{"ARBITER_API_KEY="}, "", "bench", "--url", p.url)
	require.Error(t, err)
	require.Contains(t, stderr, "need an agent key")
}

func TestBenchTimesSweepAndPages(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	env := []string{"ARBITER_DATABASE_URL=" + dbtest.SQLiteURL(t)}

	out, stderr, err := runArbiter(t, dir, env, "", "bench", "--sweep", "700", "--json")
	require.NoError(t, err, stderr)
	var sw struct {
		Seeded       int     `json:"seeded"`
		TimedOut     int     `json:"timed_out"`
		SweepSeconds float64 `json:"sweep_seconds"`
		PerSecond    float64 `json:"per_second"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &sw), out)
	require.Equal(t, 700, sw.Seeded)
	require.Equal(t, 700, sw.TimedOut)
	require.Positive(t, sw.SweepSeconds)
	require.Positive(t, sw.PerSecond)

	_, stderr, err = runArbiter(t, dir, env, "correct horse battery staple\n", "users", "create",
		"--email", "ops@example.com", "--role", "viewer", "--password-stdin")
	require.NoError(t, err, stderr)
	p := serve(t, dir, env)
	waitReady(t, p.url, 10*time.Second)
	out, stderr, err = runArbiter(t, dir, nil, "correct horse battery staple\n", "bench", "--url", p.url,
		"--page", "/", "--page", "/actions", "--requests", "5", "--email", "ops@example.com", "--password-stdin", "--json")
	require.NoError(t, err, stderr)
	var pages struct {
		Pages []struct {
			Path    string `json:"path"`
			Bytes   int    `json:"bytes"`
			Latency struct {
				Count int     `json:"count"`
				P95   float64 `json:"p95"`
			} `json:"latency_ms"`
		} `json:"pages"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &pages), out)
	require.Len(t, pages.Pages, 2)
	for i, path := range []string{"/", "/actions"} {
		require.Equal(t, path, pages.Pages[i].Path)
		require.Equal(t, 5, pages.Pages[i].Latency.Count)
		require.Positive(t, pages.Pages[i].Latency.P95)
		require.Greater(t, pages.Pages[i].Bytes, 1000, "a whole page")
	}

	_, stderr, err = runArbiter(t, dir, nil, "wrong password\n", "bench", "--url", p.url,
		"--page", "/", "--email", "ops@example.com", "--password-stdin")
	require.Error(t, err)
	require.Contains(t, stderr, "sign-in as ops@example.com failed: 401")
}

func TestBenchReceivesWebhooks(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ln.Close()

	cmd := exec.Command(binary, "bench", "--receive", addr, "--expect", "3", "--idle", "1s", "--duration", "20s", "--json")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	require.NoError(t, cmd.Start())
	deliver := func(id string) int {
		t.Helper()
		body := `{"type":"action.timed_out","timestamp":"` + time.Now().UTC().Format(time.RFC3339Nano) + `","data":{}}`
		for range 100 {
			req, _ := http.NewRequest("POST", "http://"+addr+"/hook", strings.NewReader(body))
			req.Header.Set("webhook-id", id)
			res, err := http.DefaultClient.Do(req)
			if err == nil {
				res.Body.Close()
				return res.StatusCode
			}
			time.Sleep(20 * time.Millisecond) // not listening yet
		}
		t.Fatalf("the receiver at %s never answered", addr)
		return 0
	}
	for _, id := range []string{"msg_1", "msg_2", "msg_2", "msg_3"} {
		require.Equal(t, http.StatusNoContent, deliver(id))
	}
	require.NoError(t, cmd.Wait(), errOut.String())
	var r struct {
		Received, Unique, Duplicates int
		Latency                      struct{ Count int } `json:"latency_from_commit_ms"`
	}
	require.NoError(t, json.Unmarshal(out.Bytes(), &r), out.String())
	require.Equal(t, 4, r.Received)
	require.Equal(t, 3, r.Unique)
	require.Equal(t, 1, r.Duplicates)
	require.Equal(t, 4, r.Latency.Count)
}
