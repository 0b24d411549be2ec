package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"runtime/pprof"
	"sync"
	"time"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/accounts"
	"github.com/arbiter-ledger/arbiter/services/record"
	"github.com/arbiter-ledger/arbiter/services/webhooks"
)

type sweepReport struct {
	Database    string  `json:"database"`
	Seeded      int     `json:"seeded"`
	SeedSeconds float64 `json:"seed_seconds"`
	// Approvals of the seeded intents were held for approvals that expire;
	// the others hold leases.
	Approvals int `json:"approvals"`
	// Endpoint: an enabled endpoint subscribed to the sweep's alerts.
	Endpoint     bool    `json:"endpoint"`
	TimedOut     int     `json:"timed_out"`
	SweepSeconds float64 `json:"sweep_seconds"`
	PerSecond    float64 `json:"per_second"`
}

type sweepConfig struct {
	ns          string
	n           int
	endpoint    bool // an endpoint subscribes to the alerts the sweep writes
	approvalPct int  // the share of actions held for approval, in percent
}

// expiringApprovals holds every first intent of one tool for one person's
// approval that expires a second later, as a policy would (a policy's
// shortest expiry is a minute).
type expiringApprovals struct{ tool string }

func (e expiringApprovals) Require(_ context.Context, q services.ApprovalQuery) (*record.ApprovalRequest, error) {
	if q.Tool != e.tool {
		return nil, nil
	}
	return &record.ApprovalRequest{Required: 1, ExpiresAt: q.Now.Add(time.Second), Policies: []record.PolicyRef{}}, nil
}

// timeSweep records c.n intents through the ledger (the only path that
// writes actions): c.approvalPct percent of them held for approvals that
// expire a second later, the others with 1-second leases. It waits for the
// deadlines to pass and times one Sweep, which times out every expired lease
// and denies every expired approval. With c.endpoint, an enabled endpoint
// subscribes to both alerts first. With profile set, the sweep alone is
// CPU-profiled into it.
func timeSweep(ctx context.Context, st *services.Store, c sweepConfig, profile io.Writer) (*sweepReport, error) {
	keys := accounts.NewKeys(st)
	_, secret, err := keys.CreateKey(ctx, accounts.CreateKeyRequest{Namespace: c.ns, Name: "bench-sweep", Role: services.RoleAgent})
	if err != nil {
		return nil, err
	}
	p, err := keys.Authenticate(ctx, secret)
	if err != nil {
		return nil, err
	}
	if c.endpoint {
		admin := services.Principal{Kind: "api_key", ID: "bench", Name: "bench", Role: services.RoleAdmin}
		hooks := webhooks.New(st, webhooks.Config{Policy: webhooks.AddressPolicy{AllowPrivate: true}})
		url, nss := "http://127.0.0.1:9/arbiter-bench-sweep", []string{c.ns}
		events := []record.EventType{record.EventTimedOut, record.EventApprovalExpired}
		ep, err := hooks.CreateEndpoint(ctx, admin, webhooks.EndpointInput{URL: &url, EventTypes: &events, Namespaces: &nss})
		if err != nil {
			return nil, err
		}
		defer hooks.DeleteEndpoint(context.WithoutCancel(ctx), admin, ep.ID)
	}
	const approvalTool = "bench.sweep.approval"
	ledger := services.NewLedger(st, services.LedgerConfig{Approver: expiringApprovals{tool: approvalTool}})
	held := c.n * c.approvalPct / 100
	start := time.Now()
	if err := recordIntentsWant(ctx, ledger, p, "sweep", "bench.sweep", c.n-held, record.OutcomeProceed); err != nil {
		return nil, err
	}
	if err := recordIntentsWant(ctx, ledger, p, "approve", approvalTool, held, record.OutcomePendingApproval); err != nil {
		return nil, err
	}
	rep := &sweepReport{Database: st.Where, Seeded: c.n, SeedSeconds: time.Since(start).Seconds(), Approvals: held,
		Endpoint: c.endpoint}

	// The last deadline passes a second after the last intent.
	select {
	case <-time.After(1100 * time.Millisecond):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if profile != nil {
		if err := pprof.StartCPUProfile(profile); err != nil {
			return nil, err
		}
	}
	t0 := time.Now()
	got, err := ledger.Sweep(ctx)
	took := time.Since(t0)
	if profile != nil {
		pprof.StopCPUProfile()
	}
	if err != nil {
		return nil, err
	}
	rep.TimedOut, rep.SweepSeconds, rep.PerSecond = got, took.Seconds(), float64(got)/took.Seconds()
	if got < c.n {
		return rep, fmt.Errorf("bench: the sweep acted on %d actions, expected at least %d", got, c.n)
	}
	return rep, nil
}

// recordIntents records n intents of tool with 1-second leases through the
// ledger; see recordIntentsWant.
func recordIntents(ctx context.Context, ledger *services.Ledger, p services.Principal, prefix, tool string, n int) error {
	return recordIntentsWant(ctx, ledger, p, prefix, tool, n, record.OutcomeProceed)
}

// recordIntentsWant records n intents of tool with 1-second leases through
// the ledger (the only path that writes actions), in batches on 8
// connections, under keys that start with prefix and a random run id; each
// must be answered want.
func recordIntentsWant(ctx context.Context, ledger *services.Ledger, p services.Principal, prefix, tool string, n int, want record.Outcome) error {
	run := make([]byte, 4)
	rand.Read(run)
	prefix += "-" + hex.EncodeToString(run) + "-"
	const chunk = services.MaxBatchEntries
	chunks := make(chan int)
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for from := range chunks {
				raws := make([][]byte, 0, chunk)
				for i := from; i < min(from+chunk, n); i++ {
					raws = append(raws, fmt.Appendf(nil, `{"key":"%s%d","type":"intent","tool":%q,"timeout":1}`, prefix, i, tool))
				}
				res, err := ledger.Submit(ctx, p, raws)
				if err == nil {
					for _, r := range res {
						if r.Outcome != want {
							err = fmt.Errorf("bench: seeding intent %s: outcome %s %v", r.Key, r.Outcome, r.Error)
							break
						}
					}
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	var seedErr error
feed:
	for from := 0; from < n; from += chunk {
		select {
		case chunks <- from:
		case seedErr = <-errs:
			break feed
		}
	}
	close(chunks)
	wg.Wait()
	if seedErr == nil && len(errs) > 0 {
		seedErr = <-errs
	}
	return seedErr
}
