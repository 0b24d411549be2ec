package main_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/arbiter-ledger/arbiter/services/accounts"

	"github.com/arbiter-ledger/arbiter/services/record"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
)

// These tests run the real binary as a child process.

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "arbiter-bin")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "arbiter")
	// The child is race-checked when the tests are (`make test`); a plain
	// `go test` runs a plain binary, which starts in a fraction of the time.
	build := []string{"build"}
	if raceEnabled {
		build = append(build, "-race")
	}
	out, err := exec.Command("go", append(build, "-o", binary, ".")...).CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build arbiter: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// proc is a running `arbiter serve`.
type proc struct {
	cmd  *exec.Cmd
	url  string
	logs *syncBuffer
	done chan struct{}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

var listening = regexp.MustCompile(`addr=(http://127\.0\.0\.1:\d+)`)

// serve starts `arbiter serve` in dir with env and waits until it says where
// it listens.
func serve(t *testing.T, dir string, env []string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"serve"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), append([]string{"ARBITER_ADDR=127.0.0.1:0"}, env...)...)
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	p := &proc{cmd: cmd, logs: &syncBuffer{}, done: make(chan struct{})}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			p.logs.Write([]byte(line + "\n"))
			if m := listening.FindStringSubmatch(line); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
	}()
	go func() { cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { p.kill() })
	select {
	case p.url = <-found:
	case <-p.done:
		t.Fatalf("arbiter serve exited early:\n%s", p.logs.String())
	case <-time.After(20 * time.Second):
		t.Fatalf("arbiter serve did not start:\n%s", p.logs.String())
	}
	return p
}

func (p *proc) kill() {
	if p.cmd.ProcessState == nil {
		p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
	}
}

func waitReady(t *testing.T, url string, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for time.Since(start) < within {
		res, err := http.Get(url + "/readyz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == 200 {
				return time.Since(start)
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s/readyz not 200 within %s", url, within)
	return 0
}

// createKey runs `arbiter keys create` and returns the key from the last line.
func createKey(t *testing.T, dir string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"keys", "create"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.Output()
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	key := lines[len(lines)-1]
	require.Regexp(t, `^ak_[0-9A-Za-z]{32}$`, key)
	return key
}

func post(t *testing.T, url, key, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var m map[string]any
	require.NoError(t, json.Unmarshal(raw, &m), "%s", raw)
	return res.StatusCode, m
}

// TestServeReadyInEmptyDirectory: with no configuration at all, serve makes
// its SQLite database and becomes ready. How fast is a figure for
// docs/benchmarks.md, "The figures" (a plain binary, not this one on a
// busy test machine, race-enabled under -race); here it only has to happen.
func TestServeReadyInEmptyDirectory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	start := time.Now()
	p := serve(t, dir, []string{"ARBITER_DATABASE_URL="})
	waitReady(t, p.url, 20*time.Second)
	t.Logf("ready %s after start (race detector %v)", time.Since(start), raceEnabled)
	require.FileExists(t, filepath.Join(dir, "arbiter-data", "arbiter.db"))
	require.Contains(t, p.logs.String(), "database=sqlite:arbiter-data/arbiter.db")
}

// TestKill9KeepsAcknowledgedEntries kills the server with SIGKILL right after
// responses and checks every acknowledged entry is there after restart.
func TestKill9KeepsAcknowledgedEntries(t *testing.T) {
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
			key := createKey(t, dir, env, "--namespace", "payments", "--name", "refund-bot", "--role", "agent")
			acked := map[string]string{} // key -> entry type acknowledged last
			for round := range 3 {
				for i := range 20 {
					k := fmt.Sprintf("refund:%d-%d", round, i)
					status, m := post(t, p.url+"/v1/entries", key, `{"key":"`+k+`","type":"intent","tool":"payments.refund","effect":"keyed"}`)
					require.Equal(t, 201, status, "%v", m)
					acked[k] = "intent"
					if i%2 == 0 {
						status, _ = post(t, p.url+"/v1/entries", key, `{"key":"`+k+`","type":"succeeded","attempt":1,"result":{"n":`+fmt.Sprint(i)+`}}`)
						require.Equal(t, 200, status)
						acked[k] = "succeeded"
					}
				}
				p.kill() // SIGKILL right after the last response
				p = serve(t, dir, env)
				waitReady(t, p.url, 10*time.Second)
			}
			st, err := services.Open(context.Background(), dbURL)
			require.NoError(t, err)
			defer st.Close()
			keys := accounts.NewKeys(st)
			pr, err := keys.Authenticate(context.Background(), key)
			require.NoError(t, err)
			l := services.NewLedger(st, services.LedgerConfig{})
			for k, typ := range acked {
				a, err := l.ActionByKey(context.Background(), pr, "", k)
				require.NoError(t, err, k)
				want := record.StatusInProgress
				if typ == "succeeded" {
					want = record.StatusSucceeded
				}
				require.Equal(t, want, a.Status, k)
			}
			require.Len(t, acked, 60)
		})
	}
}

// TestServeRefusesOutdatedPostgresSchema: serve does not touch a PostgreSQL
// schema unless told to.
func TestServeRefusesOutdatedPostgresSchema(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.PostgresURL(t)
	cmd := exec.Command(binary, "serve")
	cmd.Env = append(os.Environ(), "ARBITER_DATABASE_URL="+dbURL, "ARBITER_ADDR=127.0.0.1:0")
	out, err := cmd.CombinedOutput()
	require.Error(t, err)
	require.Contains(t, string(out), "run `arbiter migrate`")
	require.NotContains(t, string(out), "listening")

	p := serve(t, t.TempDir(), []string{"ARBITER_DATABASE_URL=" + dbURL}, "--migrate")
	waitReady(t, p.url, 10*time.Second)
}

// TestTwoServersTimeOutEachLeaseOnce runs two serve processes on one
// PostgreSQL and checks that every expired lease is timed out exactly once.
func TestTwoServersTimeOutEachLeaseOnce(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.PostgresURL(t)
	env := []string{"ARBITER_DATABASE_URL=" + dbURL, "ARBITER_SWEEP_INTERVAL=50ms"}
	dir := t.TempDir()
	a := serve(t, dir, env, "--migrate")
	b := serve(t, dir, env)
	key := createKey(t, dir, env, "--namespace", "fleet", "--name", "worker", "--role", "agent")
	const n = 300
	var entries strings.Builder
	entries.WriteString(`{"entries":[`)
	for i := range n {
		if i > 0 {
			entries.WriteString(",")
		}
		fmt.Fprintf(&entries, `{"key":"job:%d","type":"intent","tool":"jobs.run","timeout":1}`, i)
	}
	entries.WriteString("]}")
	status, m := post(t, a.url+"/v1/entries", key, entries.String())
	require.Equal(t, 200, status)
	for _, r := range m["results"].([]any) {
		require.Equal(t, "proceed", r.(map[string]any)["outcome"])
	}
	st, err := services.Open(context.Background(), dbURL)
	require.NoError(t, err)
	defer st.Close()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if timedOut, _ := countTimedOut(t, st); timedOut == n {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // let both sweepers run a few more times
	timedOut, entriesN := countTimedOut(t, st)
	require.Equal(t, n, timedOut, "actions timed out")
	require.Equal(t, n, entriesN, "timed_out entries: exactly one per action")
	require.Contains(t, a.logs.String()+b.logs.String(), "timed out expired leases")
}

func countTimedOut(t *testing.T, st *services.Store) (actions, entries int) {
	t.Helper()
	counts, err := st.CountByStatus(context.Background())
	require.NoError(t, err)
	n, err := services.NewLedger(st, services.LedgerConfig{}).CountEntries(context.Background(), record.TypeTimedOut)
	require.NoError(t, err)
	return int(counts["timed_out"]), n
}
