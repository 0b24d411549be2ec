package main_test

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services/dbtest"
)

// The reliability suite (make test-reliability) breaks things under load:
// it kills the server with SIGKILL, restarts PostgreSQL, runs two replicas
// and storms one key with identical intents, and asserts that nothing
// acknowledged is lost and no attempt is ever granted twice.

func reliability(t *testing.T) {
	t.Helper()
	if os.Getenv("ARBITER_TEST_RELIABILITY") != "1" {
		t.Skip("set ARBITER_TEST_RELIABILITY=1 (make test-reliability)")
	}
}

// ack is one acknowledged (non-rejected) answer.
type ack struct {
	key, typ, outcome string
	attempt           int
}

// loadRecorder plays agents against a set of servers and keeps every
// acknowledged answer.
type loadRecorder struct {
	mu        sync.Mutex
	acks      []ack
	statuses  map[int]int
	codes     map[string]int
	requests  atomic.Int64
	client    *http.Client
	key       string
	keyPrefix string
}

func newLoadRecorder(key, prefix string) *loadRecorder {
	return &loadRecorder{statuses: map[int]int{}, codes: map[string]int{}, key: key, keyPrefix: prefix,
		client: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
}

// send posts one entry and records the answer. It reports whether the entry
// was acknowledged.
func (lr *loadRecorder) send(url, body string) (map[string]any, bool) {
	lr.requests.Add(1)
	req, _ := http.NewRequest("POST", url+"/v1/entries", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+lr.key)
	res, err := lr.client.Do(req)
	if err != nil {
		lr.mu.Lock()
		lr.codes["network"]++
		lr.mu.Unlock()
		return nil, false
	}
	raw, _ := io.ReadAll(res.Body)
	res.Body.Close()
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	lr.mu.Lock()
	defer lr.mu.Unlock()
	lr.statuses[res.StatusCode]++
	if e, ok := m["error"].(map[string]any); ok && e != nil {
		lr.codes[fmt.Sprint(e["code"])]++
	}
	outcome, _ := m["outcome"].(string)
	if outcome == "" || outcome == "rejected" {
		return m, false
	}
	attempt, _ := m["attempt"].(float64)
	lr.acks = append(lr.acks, ack{key: fmt.Sprint(m["key"]), typ: fmt.Sprint(m["type"]), outcome: outcome, attempt: int(attempt)})
	return m, true
}

// agent runs one simulated agent until stop: new intents, each then
// succeeded (most), failed, or left to time out.
func (lr *loadRecorder) agent(urls func() string, id int, stop <-chan struct{}) {
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		key := fmt.Sprintf("%s:%d:%d", lr.keyPrefix, id, i)
		m, ok := lr.send(urls(), `{"key":"`+key+`","type":"intent","tool":"bench.refund","effect":"keyed","timeout":30}`)
		if !ok || m["outcome"] != "proceed" {
			time.Sleep(5 * time.Millisecond)
			continue
		}
		attempt := int(m["attempt"].(float64))
		switch i % 10 {
		case 9: // left running: its lease times out later
		case 8:
			lr.send(urls(), fmt.Sprintf(`{"key":%q,"type":"failed","attempt":%d,"error":"provider said no"}`, key, attempt))
		default:
			lr.send(urls(), fmt.Sprintf(`{"key":%q,"type":"succeeded","attempt":%d,"result":{"i":%d}}`, key, attempt, i))
		}
	}
}

// verify checks every acknowledged entry against the database and that no
// attempt of any action was granted proceed twice.
func (lr *loadRecorder) verify(t *testing.T, dbURL string) {
	t.Helper()
	db, err := sql.Open("pgx", dbURL)
	require.NoError(t, err)
	defer db.Close()
	rows, err := db.Query(`SELECT a.key, e.type, coalesce(e.attempt, 0), count(*) FROM entries e JOIN actions a ON a.id = e.action_id
		WHERE a.key LIKE $1 GROUP BY 1, 2, 3`, lr.keyPrefix+":%")
	require.NoError(t, err)
	stored := map[string]int{}
	for rows.Next() {
		var k, typ string
		var attempt, n int
		require.NoError(t, rows.Scan(&k, &typ, &attempt, &n))
		stored[fmt.Sprintf("%s|%s|%d", k, typ, attempt)] = n
		if typ == "intent" {
			require.Equal(t, 1, n, "attempt %d of %s was granted proceed %d times", attempt, k, n)
		}
	}
	require.NoError(t, rows.Err())
	granted := map[string]int{}
	for _, a := range lr.acks {
		if a.outcome == "proceed" {
			granted[fmt.Sprintf("%s|%d", a.key, a.attempt)]++
		}
		if a.outcome != "recorded" && a.outcome != "proceed" {
			continue // replays, in_progress and duplicates write nothing
		}
		typ := a.typ
		if a.typ == "succeeded" || a.typ == "failed" {
			if stored[fmt.Sprintf("%s|%s|%d", a.key, typ, a.attempt)] == 0 {
				typ = "late_result"
			}
		}
		require.Positive(t, stored[fmt.Sprintf("%s|%s|%d", a.key, typ, a.attempt)], "acknowledged %+v is not in the ledger", a)
	}
	for k, n := range granted {
		require.Equal(t, 1, n, "%s was answered proceed %d times", k, n)
	}
}

func (lr *loadRecorder) summary() string {
	lr.mu.Lock()
	defer lr.mu.Unlock()
	return fmt.Sprintf("%d requests, %d acknowledged, statuses %v, codes %v", lr.requests.Load(), len(lr.acks), lr.statuses, lr.codes)
}

// TestReliabilityKill9UnderLoad kills the server with SIGKILL three times
// while agents write to it.
func TestReliabilityKill9UnderLoad(t *testing.T) {
	reliability(t)
	t.Parallel()
	dbURL := dbtest.PostgresURL(t)
	dir := t.TempDir()
	env := []string{"ARBITER_DATABASE_URL=" + dbURL}
	p := serve(t, dir, env, "--migrate")
	key := createKey(t, dir, env, "--namespace", "load", "--name", "agent", "--role", "agent")
	lr := newLoadRecorder(key, "kill9")
	var url atomic.Value
	url.Store(p.url)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() { lr.agent(func() string { return url.Load().(string) }, i, stop) })
	}
	for range 3 {
		time.Sleep(time.Duration(700+rand.IntN(600)) * time.Millisecond)
		p.kill()
		p = serve(t, dir, env)
		url.Store(p.url)
	}
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()
	t.Log(lr.summary())
	require.Greater(t, len(lr.acks), 100, "the load did reach the server")
	lr.verify(t, dbURL)
}

// TestReliabilityTwoReplicasUnderLoad spreads agents over two serve
// processes on one PostgreSQL, kills one midway, and checks the same
// guarantees plus that the sweepers time each lease out once.
func TestReliabilityTwoReplicasUnderLoad(t *testing.T) {
	reliability(t)
	t.Parallel()
	dbURL := dbtest.PostgresURL(t)
	dir := t.TempDir()
	env := []string{"ARBITER_DATABASE_URL=" + dbURL, "ARBITER_SWEEP_INTERVAL=100ms"}
	a := serve(t, dir, env, "--migrate")
	b := serve(t, dir, env)
	key := createKey(t, dir, env, "--namespace", "load", "--name", "agent", "--role", "agent")
	lr := newLoadRecorder(key, "replicas")
	urls := []atomic.Value{}
	urls = append(urls, atomic.Value{}, atomic.Value{})
	urls[0].Store(a.url)
	urls[1].Store(b.url)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var n atomic.Int64
	pick := func() string { return urls[n.Add(1)%2].Load().(string) }
	for i := range 8 {
		wg.Go(func() { lr.agent(pick, i, stop) })
	}
	time.Sleep(1500 * time.Millisecond)
	b.kill()
	b = serve(t, dir, env)
	urls[1].Store(b.url)
	time.Sleep(1500 * time.Millisecond)
	close(stop)
	wg.Wait()
	t.Log(lr.summary())
	lr.verify(t, dbURL)

	// Leases left running: time them out with short leases and count.
	for i := range 50 {
		lr.send(pick(), fmt.Sprintf(`{"key":"replicas:lease:%d","type":"intent","tool":"bench.refund","timeout":1}`, i))
	}
	db, err := sql.Open("pgx", dbURL)
	require.NoError(t, err)
	defer db.Close()
	require.Eventually(t, func() bool {
		var left int
		require.NoError(t, db.QueryRow(`SELECT count(*) FROM actions WHERE key LIKE 'replicas:lease:%' AND status = 'in_progress'`).Scan(&left))
		return left == 0
	}, 15*time.Second, 100*time.Millisecond)
	time.Sleep(500 * time.Millisecond)
	var dup int
	require.NoError(t, db.QueryRow(`SELECT count(*) FROM (SELECT action_id FROM entries WHERE type = 'timed_out'
		GROUP BY action_id, attempt HAVING count(*) > 1) x`).Scan(&dup))
	require.Zero(t, dup, "an attempt was timed out twice")
}

// TestReliabilityDuplicateStorm sends thousands of identical intents for a
// few keys at once, through two replicas: exactly one proceed per key.
func TestReliabilityDuplicateStorm(t *testing.T) {
	reliability(t)
	t.Parallel()
	dbURL := dbtest.PostgresURL(t)
	dir := t.TempDir()
	env := []string{"ARBITER_DATABASE_URL=" + dbURL}
	a := serve(t, dir, env, "--migrate")
	b := serve(t, dir, env)
	key := createKey(t, dir, env, "--namespace", "storm", "--name", "agent", "--role", "agent")
	lr := newLoadRecorder(key, "storm")
	const keys, perKey = 5, 600
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for i := range keys * perKey {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			url := a.url
			if i%2 == 1 {
				url = b.url
			}
			lr.send(url, fmt.Sprintf(`{"key":"storm:%d","type":"intent","tool":"payments.refund","params":{"amount":1}}`, i%keys))
		})
	}
	wg.Wait()
	t.Log(lr.summary())
	proceeds := map[string]int{}
	for _, x := range lr.acks {
		if x.outcome == "proceed" {
			proceeds[x.key]++
		}
	}
	require.Len(t, proceeds, keys)
	for k, n := range proceeds {
		require.Equal(t, 1, n, "%s got %d proceeds", k, n)
	}
	for status := range lr.statuses {
		require.Less(t, status, 500, "no 5xx in a duplicate storm: %v", lr.statuses)
	}
	require.Equal(t, int64(keys*perKey), int64(len(lr.acks)), "every intent was answered proceed or in_progress")
	lr.verify(t, dbURL)
}

// TestReliabilityPostgresRestart stops and starts a PostgreSQL of its own
// under load: while it is down the API answers 503 unavailable, and it
// recovers without restarting Arbiter, losing nothing acknowledged.
func TestReliabilityPostgresRestart(t *testing.T) {
	reliability(t)
	t.Parallel()
	pg := startCluster(t)
	dbURL := pg.url
	dir := t.TempDir()
	env := []string{"ARBITER_DATABASE_URL=" + dbURL}
	p := serve(t, dir, env, "--migrate")
	key := createKey(t, dir, env, "--namespace", "load", "--name", "agent", "--role", "agent")
	lr := newLoadRecorder(key, "restart")
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() { lr.agent(func() string { return p.url }, i, stop) })
	}
	time.Sleep(time.Second)
	pg.ctl(t, "stop", "-m", "fast")
	time.Sleep(1500 * time.Millisecond)
	lr.mu.Lock()
	down503 := lr.codes["unavailable"]
	lr.mu.Unlock()
	status, m := postNoFail(p.url+"/v1/entries", key, `{"key":"restart:probe","type":"intent","tool":"t"}`)
	require.Equal(t, 503, status, "%v", m)
	require.Equal(t, "unavailable", m["error"].(map[string]any)["code"])
	res, err := http.Get(p.url + "/readyz")
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, 503, res.StatusCode)
	pg.ctl(t, "start", "-w", "-l", filepath.Join(pg.dir, "log"))
	require.Eventually(t, func() bool {
		status, _ := postNoFail(p.url+"/v1/entries", key, `{"key":"restart:after","type":"intent","tool":"t"}`)
		return status == 201 || status == 409
	}, 20*time.Second, 100*time.Millisecond, "recovers without restarting Arbiter")
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()
	t.Log(lr.summary())
	require.Positive(t, down503, "agents saw 503 unavailable while the database was down")
	for status := range lr.statuses {
		require.NotEqual(t, 500, status, "never 500: %v", lr.statuses)
	}
	lr.verify(t, dbURL)
}

func postNoFail(url, key, body string) (int, map[string]any) {
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil
	}
	defer res.Body.Close()
	var m map[string]any
	json.NewDecoder(res.Body).Decode(&m)
	return res.StatusCode, m
}

// cluster is a throwaway PostgreSQL this test may stop and start.
type cluster struct {
	dir, url, bin string
	asPostgres    bool
}

func startCluster(t *testing.T) *cluster {
	t.Helper()
	bin := ""
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		bin = filepath.Dir(p)
	} else if ms, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_ctl"); len(ms) > 0 {
		bin = filepath.Dir(ms[len(ms)-1])
	}
	require.NotEmpty(t, bin, "pg_ctl not found")
	dir, err := os.MkdirTemp("", "arbiter-reliability-pg-")
	require.NoError(t, err)
	c := &cluster{dir: dir, bin: bin, asPostgres: os.Geteuid() == 0}
	if c.asPostgres {
		u, err := user.Lookup("postgres")
		require.NoError(t, err, "running as root: the postgres user runs the cluster")
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		require.NoError(t, os.Chown(dir, uid, gid))
	}
	t.Cleanup(func() {
		c.run("pg_ctl", "-D", filepath.Join(dir, "data"), "stop", "-m", "immediate")
		os.RemoveAll(dir)
	})
	out, err := c.run("initdb", "-D", filepath.Join(dir, "data"), "-U", "postgres", "--auth=trust", "--no-sync")
	require.NoError(t, err, "%s", out)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	conf := fmt.Sprintf("port = %d\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '%s'\nfsync = off\n", port, dir)
	f, err := os.OpenFile(filepath.Join(dir, "data", "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString(conf)
	require.NoError(t, err)
	f.Close()
	c.ctl(t, "start", "-w", "-l", filepath.Join(dir, "log"))
	c.url = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
	return c
}

func (c *cluster) run(name string, args ...string) ([]byte, error) {
	path := filepath.Join(c.bin, name)
	var cmd *exec.Cmd
	if c.asPostgres {
		cmd = exec.Command("runuser", append([]string{"-u", "postgres", "--", path}, args...)...)
	} else {
		cmd = exec.Command(path, args...)
	}
	return cmd.CombinedOutput()
}

func (c *cluster) ctl(t *testing.T, args ...string) {
	t.Helper()
	out, err := c.run("pg_ctl", append([]string{"-D", filepath.Join(c.dir, "data")}, args...)...)
	require.NoError(t, err, "pg_ctl %v: %s", args, out)
}
