package evidence

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	"github.com/arbiter-ledger/arbiter/services/driver"
	"github.com/arbiter-ledger/arbiter/services/record"
)

// SelfCheckEvery is how often serve checks the newest part of the log.
const SelfCheckEvery = time.Hour

// SelfCheckNewest is how many of the newest leaves the self-check reads.
const SelfCheckNewest = 100_000

// SelfChecker checks the newest part of the log against the live tables
// (VerifyDatabase) and sends audit.mismatch when it finds a change.
type SelfChecker struct {
	drv driver.Logger
	log *slog.Logger
	// Observe is told of each check (the metrics).
	observe func(problems int, err error)

	mu   sync.Mutex
	last *Report
	err  error
}

// NewSelfChecker checks the log of a driver; observe may be nil.
func NewSelfChecker(drv driver.Logger, log *slog.Logger, observe func(problems int, err error)) *SelfChecker {
	if observe == nil {
		observe = func(int, error) {}
	}
	return &SelfChecker{drv: drv, log: log, observe: observe}
}

// Check runs one check now, with the log's own verifier key. Before the
// first checkpoint there is nothing to check: it answers nil, nil.
func (s *SelfChecker) Check(ctx context.Context) (*Report, error) {
	vkey, err := s.drv.LogVerifierKeyOf(ctx)
	if err != nil || vkey == "" {
		return nil, err
	}
	rep, err := VerifyDatabase(ctx, s.drv, vkey, VerifyOptions{Newest: SelfCheckNewest})
	s.mu.Lock()
	s.last, s.err = rep, err
	s.mu.Unlock()
	if err != nil {
		s.observe(0, err)
		return nil, err
	}
	s.observe(len(rep.Problems), nil)
	if !rep.OK() {
		s.log.Error("evidence log: the tables changed since they were logged", "problems", len(rep.Problems),
			"first", rep.Problems[0].String())
		alert := driver.Alert{ID: driver.NewID(), Type: record.EventAuditMismatch, Build: func() json.RawMessage {
			return alertBody(record.EventAuditMismatch, rep.At, alertData{Mismatch: rep})
		}}
		if err := s.drv.LogAlert(ctx, alert, rep.At); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// Last is the last check's report and error; nil, nil before the first.
func (s *SelfChecker) Last() (*Report, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last, s.err
}

// Run checks every interval until ctx ends, the first time a minute
// after it starts (or one interval, when shorter).
func (s *SelfChecker) Run(ctx context.Context, every time.Duration) {
	t := time.NewTimer(min(every, time.Minute))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			t.Reset(every)
		}
		if _, err := s.Check(ctx); err != nil && ctx.Err() == nil {
			s.log.Error("evidence log: self-check failed", "err", err)
		}
	}
}
