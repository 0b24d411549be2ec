// Package bench is `arbiter bench`: it measures Arbiter, by playing agents
// against a running server or by timing the sweeper, bulk decisions,
// dashboard pages, webhook deliveries and parked waiters.
// docs/benchmarks.md has the figures and how they were made.
package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/arbiter-ledger/arbiter/services/accounts"

	"github.com/arbiter-ledger/arbiter/services"
)

// Cmd is the command's flags. By default it plays agents against a running
// server; --sweep times the sweeper in this process, --page times dashboard
// pages and --receive is a webhook endpoint that counts and times deliveries.
type Cmd struct {
	URL         string        `env:"ARBITER_URL" default:"http://127.0.0.1:8080" help:"The server to load."`
	APIKey      string        `name:"api-key" env:"ARBITER_API_KEY" help:"An agent key to write entries with."`
	CreateKey   bool          `name:"create-key" help:"Create an agent key in --namespace first (needs --database-url)."`
	Namespace   string        `default:"bench" help:"Namespace of the key made by --create-key and of the actions --sweep makes."`
	Concurrency int           `short:"c" default:"16" help:"Agents sending at once, each on its own connection."`
	Duration    time.Duration `short:"d" default:"10s" help:"How long to send."`
	Batch       int           `default:"1" help:"Entries per request (1-500); 1 sends single entries."`
	Mix         string        `default:"intent=70,outcome=20,heartbeat=5,replay=5" help:"Weights of new intents, succeeded outcomes for keys it started, heartbeats, and replays (intents on finished keys)."`
	Rate        float64       `help:"Requests per second across all agents; 0 sends as fast as the server answers."`
	Lease       int           `default:"300" help:"Lease of each intent, in seconds."`
	Groups      int           `help:"Spread the new intents over this many business groups: their params carry \"customer\":\"c<k>\", k below this number, fixed by the key, for limits grouped by params.customer (0 leaves it out)."`
	JSON        bool          `help:"Print the report as JSON."`

	Sweep          int    `help:"Instead of loading a server: record this many intents with 1-second leases in --database-url through the ledger, in this process, and time one sweep timing them out."`
	CPUProfile     string `name:"cpuprofile" help:"With --sweep: write a CPU profile of the sweep to this file."`
	SweepEndpoint  bool   `name:"sweep-endpoint" help:"With --sweep: an enabled webhook endpoint subscribes to action.timed_out and action.approval_expired, so every deadline the sweep acts on also writes an alert and a delivery."`
	SweepApprovals int    `name:"sweep-approvals" help:"With --sweep: this percentage (0-100) of the actions are intents held for approval whose approval expires a second later, which the sweep denies; the rest are leases it times out."`

	Bulk        int `help:"Instead of loading a server: record this many intents with 1-second leases in --database-url through the ledger, in this process, let the sweeper time them out, and time abandoning them in bulk decisions of --bulk-batch ids each, with an endpoint subscribed to action.decided (each decision writes its entry, alert and delivery); then --bulk-singles more one decision at a time."`
	BulkBatch   int `name:"bulk-batch" default:"1000" help:"With --bulk: actions per bulk decision (1-1000)."`
	BulkSingles int `name:"bulk-singles" default:"1000" help:"With --bulk: how many actions to decide one at a time, for comparison (0: none)."`

	Receive string        `help:"Instead of writing entries: be a webhook endpoint on this address (e.g. 127.0.0.1:9099) and report the deliveries, until --expect distinct messages arrived and none came for --idle, or --duration passed."`
	Expect  int           `help:"With --receive: how many distinct messages to wait for; fewer is an error."`
	Idle    time.Duration `default:"3s" help:"With --receive: stop after this long without a delivery."`

	Waiters     int           `help:"Instead of loading a server: send this many single intents with Prefer: wait at once, each on its own connection, for the tool bench.wait (which a policy must hold for approval), sample the server (--server-pid) and PostgreSQL (--database-url) while they all wait, approve them in bulk decisions of --decide-batch, and time each waiter's answer from its decision."`
	AdminKey    string        `name:"admin-key" env:"ARBITER_ADMIN_KEY" help:"With --waiters: an operator or admin key, to list and decide the actions."`
	DecideURL   string        `name:"decide-url" help:"With --waiters: send the decisions to this server (another replica) instead of --url."`
	DecideBatch int           `name:"decide-batch" default:"1000" help:"With --waiters: actions per bulk decision (1-1000)."`
	DecideEvery time.Duration `name:"decide-every" help:"With --waiters: send a bulk decision this often (0: each as soon as the previous one is answered)."`
	WaitFor     int           `name:"wait-for" default:"60" help:"With --waiters: N of Prefer: wait=N."`
	WaitSample  time.Duration `name:"wait-sample" default:"5s" help:"With --waiters: how long to sample the server while every request waits."`
	ServerPID   int           `name:"server-pid" help:"With --waiters: the server's process id, to sample its memory and CPU."`

	Page          []string `help:"Instead of writing entries: GET these dashboard paths with a signed-in session (--email, --password-stdin) and time them."`
	Requests      int      `default:"100" help:"With --page: timed GETs of each page, one at a time."`
	Email         string   `help:"With --page: the dashboard user to sign in as."`
	PasswordStdin bool     `name:"password-stdin" help:"With --page: read the user's password from standard input."`
}

// Env is what a run takes from the command line around it: the database it
// names, and how to open it as arbiter's other commands do (its schema
// checked, migrated when embedded).
type Env struct {
	DatabaseURL string
	Open        func(context.Context) (*services.Store, error)
}

// Run measures what the flags ask for and prints its report.
func (b *Cmd) Run(ctx context.Context, c Env) error {
	// Each mode returns its report even when it fails on what it measured,
	// so that the figures are printed either way.
	var (
		rep any
		err error
	)
	switch {
	case b.Sweep > 0:
		var r *sweepReport
		if r, err = b.runSweep(ctx, c); r != nil {
			rep = r
		}
	case b.Bulk > 0:
		var r *bulkReport
		if r, err = b.runBulk(ctx, c); r != nil {
			rep = r
		}
	case b.Waiters > 0:
		var r *waitReport
		if r, err = b.runWaiters(ctx, c); r != nil {
			rep = r
		}
	case len(b.Page) > 0:
		var r *pagesReport
		if r, err = b.runPages(ctx); r != nil {
			rep = r
		}
	case b.Receive != "":
		var r *receiveReport
		if r, err = b.runReceive(ctx); r != nil {
			rep = r
		}
	default:
		var r *loadReport
		if r, err = b.runLoad(ctx, c); r != nil {
			rep = r
		}
	}
	if rep != nil {
		if b.JSON {
			enc := json.NewEncoder(os.Stdout)
			enc.SetIndent("", "  ")
			if perr := enc.Encode(rep); perr != nil {
				return perr
			}
		} else if perr := printReport(os.Stdout, rep); perr != nil {
			return perr
		}
	}
	return err
}

func (b *Cmd) runLoad(ctx context.Context, c Env) (*loadReport, error) {
	m, err := parseMix(b.Mix)
	if err != nil {
		return nil, err
	}
	switch {
	case b.Concurrency < 1:
		return nil, errors.New("--concurrency must be at least 1")
	case b.Batch < 1 || b.Batch > services.MaxBatchEntries:
		return nil, fmt.Errorf("--batch must be between 1 and %d", services.MaxBatchEntries)
	case b.Duration <= 0:
		return nil, errors.New("--duration must be positive")
	case b.Lease < 1:
		return nil, errors.New("--lease must be at least 1 second")
	case b.Groups < 0:
		return nil, errors.New("--groups must not be negative")
	}
	key := b.APIKey
	if b.CreateKey {
		if key, err = b.createKey(ctx, c); err != nil {
			return nil, err
		}
	}
	if key == "" {
		return nil, errors.New("need an agent key: --api-key (ARBITER_API_KEY), or --create-key with --database-url")
	}
	return runLoad(ctx, loadConfig{url: strings.TrimRight(b.URL, "/"), key: key, concurrency: b.Concurrency,
		duration: b.Duration, batch: b.Batch, mix: m, rate: b.Rate, lease: b.Lease, groups: b.Groups})
}

// createKey makes an agent key for this run in the database the server uses.
func (b *Cmd) createKey(ctx context.Context, c Env) (string, error) {
	st, err := c.Open(ctx)
	if err != nil {
		return "", err
	}
	defer st.Close()
	_, secret, err := accounts.NewKeys(st).CreateKey(ctx, accounts.CreateKeyRequest{
		Namespace: b.Namespace, Name: "bench", Role: services.RoleAgent})
	return secret, err
}

func (b *Cmd) runSweep(ctx context.Context, c Env) (*sweepReport, error) {
	st, err := c.Open(ctx)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	var profile io.Writer
	if b.CPUProfile != "" {
		f, err := os.Create(b.CPUProfile)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		profile = f
	}
	if b.SweepApprovals < 0 || b.SweepApprovals > 100 {
		return nil, errors.New("--sweep-approvals must be between 0 and 100")
	}
	return timeSweep(ctx, st, sweepConfig{ns: b.Namespace, n: b.Sweep, endpoint: b.SweepEndpoint,
		approvalPct: b.SweepApprovals}, profile)
}

func (b *Cmd) runBulk(ctx context.Context, c Env) (*bulkReport, error) {
	if b.BulkBatch < 1 || b.BulkBatch > services.MaxBulkActions {
		return nil, fmt.Errorf("--bulk-batch must be between 1 and %d", services.MaxBulkActions)
	}
	if b.BulkSingles < 0 {
		return nil, errors.New("--bulk-singles must be 0 or more")
	}
	st, err := c.Open(ctx)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	return timeBulk(ctx, st, b.Namespace, b.Bulk, b.BulkBatch, b.BulkSingles)
}

func printReport(w io.Writer, rep any) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	switch r := rep.(type) {
	case *loadReport:
		fmt.Fprintf(tw, "%d agents for %.1fs, %d entries per request, mix %s\n", r.Concurrency, r.Seconds, r.Batch, r.Mix)
		fmt.Fprintf(tw, "entries/s\t%.0f\t(%d entries acknowledged)\n", r.EntriesPerSecond, r.Entries)
		fmt.Fprintf(tw, "requests/s\t%.0f\t(%d requests)\n", r.RequestsPerSecond, r.Requests)
		fmt.Fprintf(tw, "latency ms\tp50 %.2f\tp95 %.2f\tp99 %.2f\tmax %.2f\n", r.Latency.P50, r.Latency.P95, r.Latency.P99, r.Latency.Max)
		for _, k := range sortedKeys(r.LatencyByKind) {
			l := r.LatencyByKind[k]
			fmt.Fprintf(tw, "  %s (%d)\tp50 %.2f\tp95 %.2f\tp99 %.2f\tmax %.2f\n", k, l.Count, l.P50, l.P95, l.P99, l.Max)
		}
		for _, k := range sortedKeys(r.Outcomes) {
			fmt.Fprintf(tw, "outcome %s\t%d\n", k, r.Outcomes[k])
		}
		for _, k := range sortedKeys(r.Errors) {
			fmt.Fprintf(tw, "error %s\t%d\n", k, r.Errors[k])
		}
	case *sweepReport:
		fmt.Fprintf(tw, "recorded %d intents in %.1fs: %d with 1 s leases, %d held for approvals expiring in 1 s; endpoint subscribed: %v\n",
			r.Seeded, r.SeedSeconds, r.Seeded-r.Approvals, r.Approvals, r.Endpoint)
		fmt.Fprintf(tw, "sweep acted on %d actions in %.3fs (%.0f per second)\n", r.TimedOut, r.SweepSeconds, r.PerSecond)
	case *bulkReport:
		fmt.Fprintf(tw, "decided %d timed-out actions in %d bulk decisions of %d in %.3fs (%.0f per second)\n",
			r.Applied, r.Batches, r.BatchSize, r.Seconds, r.PerSecond)
		fmt.Fprintf(tw, "per bulk decision, ms\tp50 %.1f\tp95 %.1f\tmax %.1f\n", r.BatchMS.P50, r.BatchMS.P95, r.BatchMS.Max)
		fmt.Fprintf(tw, "decision entries\t%d\t(distinct actions)\n", r.DecisionEntries)
		fmt.Fprintf(tw, "action.decided alerts\t%d\t(distinct actions)\n", r.DecidedAlerts)
		if r.Singles > 0 {
			fmt.Fprintf(tw, "one at a time: %d decisions in %.3fs (%.0f per second)\n", r.Singles, r.SingleSeconds, r.SinglePerSecond)
		}
	case *receiveReport:
		fmt.Fprintf(tw, "received %d deliveries of %d messages (%d duplicates) in %.1fs: %.0f per second\n",
			r.Received, r.Unique, r.Duplicates, r.Seconds, r.PerSecond)
		fmt.Fprintf(tw, "from commit, ms\tp50 %.1f\tp95 %.1f\tp99 %.1f\tmax %.1f\n", r.Latency.P50, r.Latency.P95, r.Latency.P99, r.Latency.Max)
	case *waitReport:
		fmt.Fprintf(tw, "%d requests waiting (Prefer: wait=%d) on %s, all waiting after %.1fs\n", r.Waiters, r.WaitFor, r.URL, r.OpenSeconds)
		if r.RSSWaitingMiB > 0 {
			fmt.Fprintf(tw, "server RSS MiB\tbefore %.1f\twaiting %.1f\tpeak %.1f\tCPU while waiting %.0f%%\n", r.RSSBeforeMiB, r.RSSWaitingMiB, r.HWMMiB, r.ServerCPUPercent)
		}
		if s := r.Backends; s != nil {
			fmt.Fprintf(tw, "PostgreSQL backends\tbefore %d\tmax %d\tnot idle max %d, mean %.2f (%d samples)\n", s.Before, s.Max, s.NotIdleMax, s.NotIdleMean, s.Samples)
		}
		fmt.Fprintf(tw, "decided %d in bulk decisions of %d on %s in %.2fs\n", r.Decisions, r.DecideBatch, r.DecideURL, r.DecideSeconds)
		l := r.ReleaseFromDecision
		fmt.Fprintf(tw, "release from decision ms\tp50 %.1f\tp99 %.1f\tmax %.1f\t%d over 1 s\n", l.P50, l.P99, l.Max, r.OverOneSecond)
		l = r.ReleaseFromAck
		fmt.Fprintf(tw, "release from its ack ms\tp50 %.1f\tp99 %.1f\tmax %.1f\n", l.P50, l.P99, l.Max)
		for _, k := range sortedKeys(r.Outcomes) {
			fmt.Fprintf(tw, "outcome %s\t%d\n", k, r.Outcomes[k])
		}
		for _, k := range sortedKeys(r.Errors) {
			fmt.Fprintf(tw, "error %s\t%d\n", k, r.Errors[k])
		}
	case *pagesReport:
		fmt.Fprintln(tw, "page\trequests\tp50 ms\tp95 ms\tp99 ms\tmax ms\tbytes")
		for _, p := range r.Pages {
			fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.1f\t%.1f\t%.1f\t%d\n", p.Path, p.Latency.Count, p.Latency.P50, p.Latency.P95,
				p.Latency.P99, p.Latency.Max, p.Bytes)
		}
	}
	return tw.Flush()
}
