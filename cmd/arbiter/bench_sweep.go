package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"runtime/pprof"
	"sync"
	"time"

	"github.com/arbiter-ledger/arbiter/services/accounts"

	"github.com/arbiter-ledger/arbiter/services/record"

	"github.com/arbiter-ledger/arbiter/services"
)

type sweepReport struct {
	Database     string  `json:"database"`
	Seeded       int     `json:"seeded"`
	SeedSeconds  float64 `json:"seed_seconds"`
	TimedOut     int     `json:"timed_out"`
	SweepSeconds float64 `json:"sweep_seconds"`
	PerSecond    float64 `json:"per_second"`
}

// timeSweep records n intents with 1-second leases through the ledger (the
// only path that writes actions), waits for the leases to pass, and times one
// Sweep, which times out every expired lease. With profile set, the sweep
// alone is CPU-profiled into it.
func timeSweep(ctx context.Context, st *services.Store, ns string, n int, profile io.Writer) (*sweepReport, error) {
	keys := accounts.NewKeys(st)
	_, secret, err := keys.CreateKey(ctx, accounts.CreateKeyRequest{Namespace: ns, Name: "bench-sweep", Role: services.RoleAgent})
	if err != nil {
		return nil, err
	}
	p, err := keys.Authenticate(ctx, secret)
	if err != nil {
		return nil, err
	}
	ledger := services.NewLedger(st)
	start := time.Now()
	if err := recordIntents(ctx, ledger, p, "sweep", "bench.sweep", n); err != nil {
		return nil, err
	}
	rep := &sweepReport{Database: st.Where, Seeded: n, SeedSeconds: time.Since(start).Seconds()}

	// The last lease ends a second after the last intent.
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
	if got < n {
		return rep, fmt.Errorf("bench: the sweep timed out %d actions, expected at least %d", got, n)
	}
	return rep, nil
}

// recordIntents records n intents of tool with 1-second leases through the
// ledger (the only path that writes actions), in batches on 8 connections,
// under keys that start with prefix and a random run id.
func recordIntents(ctx context.Context, ledger *services.Ledger, p services.Principal, prefix, tool string, n int) error {
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
						if r.Outcome != record.OutcomeProceed {
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
