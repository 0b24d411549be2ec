package bench

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/arbiter-ledger/arbiter/client"
)

// waitTool is the tool of the intents --waiters sends; the policy the run
// needs holds it for approval.
const waitTool = "bench.wait"

type waitReport struct {
	URL       string `json:"url"`
	DecideURL string `json:"decide_url"`
	Waiters   int    `json:"waiters"`
	WaitFor   int    `json:"prefer_wait"`
	// OpenSeconds is from the first request sent until every action
	// awaited approval.
	OpenSeconds float64 `json:"open_seconds"`
	// WaitSeconds is how long the sampling of the waiting ran.
	WaitSeconds float64 `json:"wait_seconds"`
	// The server's resident memory (/proc/PID/status), MiB: before the
	// requests, at most while all of them waited, and its peak (VmHWM) at
	// the end of the run.
	RSSBeforeMiB  float64 `json:"rss_before_mib,omitempty"`
	RSSWaitingMiB float64 `json:"rss_waiting_mib,omitempty"`
	HWMMiB        float64 `json:"hwm_mib,omitempty"`
	// ServerCPUPercent is the server's CPU (of one core) while they waited.
	ServerCPUPercent float64 `json:"server_cpu_percent_waiting,omitempty"`
	// PostgreSQL backends of the database (pg_stat_activity, the sampler's
	// own left out): before, and at most while they waited, all and not
	// idle; Samples is how many samples the figures are made of.
	Backends      *backendSamples `json:"pg_backends,omitempty"`
	Decisions     int             `json:"decisions"`
	DecideBatch   int             `json:"decide_batch"`
	DecideEvery   float64         `json:"decide_every_seconds"`
	DecideSeconds float64         `json:"decide_seconds"`
	// ReleaseFromDecision is from the decision's recorded time (the
	// approval's "at", taken before its transaction commits) to the
	// waiter's answer: an upper bound of the time from the commit.
	ReleaseFromDecision latency `json:"release_from_decision_ms"`
	OverOneSecond       int     `json:"released_over_1s"`
	// ReleaseFromAck is from the bulk decision's answer (after its commit)
	// to the waiter's answer: a lower bound.
	ReleaseFromAck latency        `json:"release_from_ack_ms"`
	Outcomes       map[string]int `json:"outcomes"`
	Errors         map[string]int `json:"errors"`

	mu       sync.Mutex
	ack      map[string]time.Time // per action, when its bulk decision was answered
	released []released
}

type backendSamples struct {
	Before      int     `json:"before"`
	Max         int     `json:"max"`
	NotIdleMax  int     `json:"not_idle_max"`
	NotIdleMean float64 `json:"not_idle_mean"`
	Samples     int     `json:"samples"`
}

func (r *waitReport) fail(kind string) {
	r.mu.Lock()
	r.Errors[kind]++
	r.mu.Unlock()
}

// runWaiters opens b.Waiters single-intent requests with Prefer: wait at
// once, each on its own connection, for a tool a policy holds for approval;
// samples the server while they all wait; approves them in bulk decisions
// of b.DecideBatch; and times each waiter's answer from its decision.
func (b *Cmd) runWaiters(ctx context.Context, c Env) (*waitReport, error) {
	switch {
	case b.APIKey == "" || b.AdminKey == "":
		return nil, errors.New("--waiters needs --api-key (an agent key) and --admin-key (an operator or admin key, to list and decide)")
	case b.DecideBatch < 1 || b.DecideBatch > 1000:
		return nil, errors.New("--decide-batch must be between 1 and 1000")
	}
	base := strings.TrimRight(b.URL, "/")
	decideURL := strings.TrimRight(cmp.Or(b.DecideURL, base), "/")
	rep := &waitReport{DecideEvery: b.DecideEvery.Seconds(), URL: base, DecideURL: decideURL, Waiters: b.Waiters, WaitFor: b.WaitFor, DecideBatch: b.DecideBatch,
		Outcomes: map[string]int{}, Errors: map[string]int{}, ack: map[string]time.Time{}}
	admin := client.New(base, b.AdminKey, client.WithUserAgent("arbiter-bench"))
	decider := client.New(decideURL, b.AdminKey, client.WithUserAgent("arbiter-bench"))

	var watch *sql.DB
	if strings.HasPrefix(c.DatabaseURL, "postgres") {
		var err error
		if watch, err = sql.Open("pgx", c.DatabaseURL); err != nil {
			return nil, err
		}
		defer watch.Close()
		watch.SetMaxOpenConns(1)
		rep.Backends = &backendSamples{}
		if rep.Backends.Before, _, err = pgBackends(ctx, watch); err != nil {
			return nil, err
		}
	}
	if b.ServerPID > 0 {
		rep.RSSBeforeMiB, _ = procStatusMiB(b.ServerPID, "VmRSS")
	}

	u, err := url.Parse(base)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return nil, fmt.Errorf("--url %q: want http://host:port", b.URL)
	}
	head := fmt.Appendf(nil, "POST %s/v1/entries HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n"+
		"Content-Type: application/json\r\nPrefer: wait=%d\r\nConnection: close\r\nContent-Length: ", u.Path, u.Host, b.APIKey, b.WaitFor)
	run := make([]byte, 4)
	rand.Read(run)
	prefix := "wait-" + hex.EncodeToString(run) + "-"

	// Every waiter dials, sends and then blocks reading its answer; dials
	// are bounded so the listen backlog is not overrun.
	dials := make(chan struct{}, 256)
	var wg sync.WaitGroup
	var sent atomic.Int64
	start := time.Now()
	for i := range b.Waiters {
		wg.Go(func() {
			dials <- struct{}{}
			conn, err := net.DialTimeout("tcp", u.Host, 30*time.Second)
			if err != nil {
				<-dials
				rep.fail("dial")
				return
			}
			defer conn.Close()
			body := fmt.Appendf(nil, `{"key":"%s%d","type":"intent","tool":%q,"timeout":300}`, prefix, i, waitTool)
			conn.SetDeadline(time.Now().Add(time.Duration(b.WaitFor)*time.Second + 5*time.Minute))
			bw := bufio.NewWriterSize(conn, 512)
			bw.Write(head)
			bw.WriteString(strconv.Itoa(len(body)))
			bw.WriteString("\r\n\r\n")
			bw.Write(body)
			err = bw.Flush()
			<-dials
			if err != nil {
				rep.fail("send")
				return
			}
			sent.Add(1)
			bc := &benchConn{c: conn, br: bufio.NewReaderSize(conn, 4<<10)}
			var resp bytes.Buffer
			status, err := bc.readAnswer(&resp)
			done := time.Now()
			if err != nil {
				rep.fail("read")
				return
			}
			rep.answered(status, resp.Bytes(), done)
		})
	}

	// All waiting: every action awaits approval (then a second more, for
	// the last answers of the intents to turn into waits).
	var ids []string
	for {
		if ids, err = awaitingIDs(ctx, admin); err != nil {
			return rep, err
		}
		if len(ids) >= b.Waiters {
			break
		}
		if time.Since(start) > 5*time.Minute || (sent.Load() == 0 && time.Since(start) > time.Minute) {
			return rep, fmt.Errorf("bench: only %d of %d actions await approval (is a policy holding %q in the key's namespace?)",
				len(ids), b.Waiters, waitTool)
		}
		time.Sleep(250 * time.Millisecond)
	}
	slices.Reverse(ids) // oldest first: the first to wait are the first decided
	rep.OpenSeconds = time.Since(start).Seconds()
	time.Sleep(time.Second)

	// Watch the waiting.
	w0 := time.Now()
	cpu0, _ := procCPUSeconds(b.ServerPID)
	var notIdleSum int
	for time.Since(w0) < b.WaitSample {
		if b.ServerPID > 0 {
			rss, _ := procStatusMiB(b.ServerPID, "VmRSS")
			rep.RSSWaitingMiB = max(rep.RSSWaitingMiB, rss)
		}
		if watch != nil {
			all, busy, err := pgBackends(ctx, watch)
			if err != nil {
				return rep, err
			}
			s := rep.Backends
			s.Max, s.NotIdleMax, s.Samples = max(s.Max, all), max(s.NotIdleMax, busy), s.Samples+1
			notIdleSum += busy
		}
		time.Sleep(20 * time.Millisecond)
	}
	rep.WaitSeconds = time.Since(w0).Seconds()
	if cpu1, err := procCPUSeconds(b.ServerPID); err == nil && b.ServerPID > 0 {
		rep.ServerCPUPercent = 100 * (cpu1 - cpu0) / rep.WaitSeconds
	}
	if rep.Backends != nil && rep.Backends.Samples > 0 {
		rep.Backends.NotIdleMean = float64(notIdleSum) / float64(rep.Backends.Samples)
	}

	// Decide them, a bulk decision at a time.
	d0 := time.Now()
	for from := 0; from < len(ids); from += b.DecideBatch {
		if b.DecideEvery > 0 {
			time.Sleep(time.Until(d0.Add(time.Duration(from/b.DecideBatch) * b.DecideEvery)))
		}
		batch := ids[from:min(from+b.DecideBatch, len(ids))]
		res, err := decider.DecideMany(ctx, client.BulkDecision{Filter: client.BulkFilter{IDs: batch},
			Decision: "approve", Reason: "bench", MaxCount: len(batch)})
		acked := time.Now()
		if err != nil {
			return rep, fmt.Errorf("bench: bulk decision: %w", err)
		}
		rep.mu.Lock()
		for _, id := range batch {
			rep.ack[id] = acked
		}
		rep.mu.Unlock()
		rep.Decisions += res.Applied
	}
	rep.DecideSeconds = time.Since(d0).Seconds()
	wg.Wait()
	if b.ServerPID > 0 {
		rep.HWMMiB, _ = procStatusMiB(b.ServerPID, "VmHWM")
	}
	rep.finish()
	if n := len(rep.Errors); n > 0 || rep.Outcomes["proceed"] != b.Waiters {
		return rep, fmt.Errorf("bench: %d of %d waiters answered proceed; errors %v", rep.Outcomes["proceed"], b.Waiters, rep.Errors)
	}
	return rep, nil
}

// answered keeps one waiter's answer: its outcome and when it came.
func (r *waitReport) answered(status int, body []byte, at time.Time) {
	var res struct {
		Outcome string         `json:"outcome"`
		Action  *client.Action `json:"action"`
	}
	if err := json.Unmarshal(body, &res); err != nil || res.Action == nil {
		r.fail(fmt.Sprintf("status %d", status))
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Outcomes[res.Outcome]++
	if res.Outcome != "proceed" || status != 201 {
		r.Errors[fmt.Sprintf("status %d %s", status, res.Outcome)]++
		return
	}
	if ap := res.Action.Approval; ap != nil && len(ap.Approvals) > 0 {
		r.released = append(r.released, released{id: res.Action.ID, decided: ap.Approvals[len(ap.Approvals)-1].At, at: at})
	}
}

type released struct {
	id          string
	decided, at time.Time
}

func (r *waitReport) finish() {
	var fromDecision, fromAck []time.Duration
	for _, x := range r.released {
		d := x.at.Sub(x.decided)
		fromDecision = append(fromDecision, d)
		if d > time.Second {
			r.OverOneSecond++
		}
		if t, ok := r.ack[x.id]; ok {
			fromAck = append(fromAck, max(x.at.Sub(t), 0))
		}
	}
	r.ReleaseFromDecision, r.ReleaseFromAck = summarize(fromDecision), summarize(fromAck)
}

// awaitingIDs lists the ids of the bench's actions awaiting approval.
func awaitingIDs(ctx context.Context, c *client.Client) ([]string, error) {
	var ids []string
	o := client.ListOptions{Status: []client.Status{client.StatusAwaitingApproval}, Tool: waitTool, Limit: 500}
	for {
		page, err := c.ListActions(ctx, o)
		if err != nil {
			return nil, err
		}
		for _, a := range page.Actions {
			ids = append(ids, a.ID)
		}
		if page.NextCursor == "" {
			return ids, nil
		}
		o.Cursor = page.NextCursor
	}
}

// pgBackends counts the database's backends other than the caller's, and
// those not idle.
func pgBackends(ctx context.Context, db *sql.DB) (all, busy int, err error) {
	err = db.QueryRowContext(ctx, `SELECT count(*), count(*) FILTER (WHERE state <> 'idle') FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&all, &busy)
	return all, busy, err
}

// procStatusMiB reads a memory line (VmRSS, VmHWM) of /proc/PID/status.
func procStatusMiB(pid int, field string) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024, err
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

// procCPUSeconds reads a process's CPU time, user and system.
func procCPUSeconds(pid int) (float64, error) {
	if pid <= 0 {
		return 0, errors.New("no pid")
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The fields after the command (which may hold spaces) in parentheses.
	_, rest, _ := strings.Cut(string(b), ") ")
	f := strings.Fields(rest)
	if len(f) < 13 {
		return 0, errors.New("short /proc stat")
	}
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / 100, nil // USER_HZ is 100 on Linux
}
