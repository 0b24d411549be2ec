package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/web"
)

type serveCmd struct {
	Addr          string        `env:"ARBITER_ADDR" default:"127.0.0.1:8080" help:"Address to listen on."`
	SweepInterval time.Duration `name:"sweep-interval" env:"ARBITER_SWEEP_INTERVAL" default:"1s" help:"How often expired leases are timed out."`
	Retention     time.Duration `env:"ARBITER_RETENTION" default:"720h" help:"How long terminal actions are kept (0 keeps them forever); unresolved actions are never pruned."`
	Migrate       bool          `env:"ARBITER_AUTO_MIGRATE" help:"Apply pending migrations at start (always done on SQLite)."`
	DrainTimeout  time.Duration `name:"drain-timeout" env:"ARBITER_DRAIN_TIMEOUT" default:"30s" help:"How long in-flight requests may finish after SIGTERM."`
}

func (s *serveCmd) Run(ctx context.Context, c *cli, log *slog.Logger) error {
	if s.SweepInterval <= 0 {
		return fmt.Errorf("--sweep-interval must be positive, got %s", s.SweepInterval)
	}
	if s.Retention < 0 {
		return fmt.Errorf("--retention must not be negative, got %s", s.Retention)
	}
	st, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	if err := ensureSchema(ctx, st, s.Migrate || st.Dialect == services.SQLite); err != nil {
		return err
	}
	ledger := services.NewLedger(st)
	metrics := web.NewMetrics(ledger.CountByStatus)
	handler := web.New(web.Deps{Store: st, Ledger: ledger, Keys: services.NewKeys(st), Metrics: metrics, Log: log})

	ln, err := net.Listen("tcp", s.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", s.Addr, err)
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 60 * time.Second,
		IdleTimeout: 120 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	log.Info("arbiter: listening", "addr", "http://"+ln.Addr().String(), "database", st.Where, "dialect", st.Dialect,
		"sweep_interval", s.SweepInterval.String(), "retention", s.Retention.String())

	bg, stopBG := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { ledger.RunSweeper(bg, log, s.SweepInterval, s.Retention, metrics.ObserveSweep) })

	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	select {
	case err := <-serveErr:
		stopBG()
		wg.Wait()
		return err
	case <-ctx.Done():
	}
	log.Info("arbiter: shutting down; draining in-flight requests", "timeout", s.DrainTimeout.String())
	dctx, cancel := context.WithTimeout(context.Background(), s.DrainTimeout)
	defer cancel()
	err = srv.Shutdown(dctx)
	stopBG()
	wg.Wait()
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("drain: %w", err)
	}
	log.Info("arbiter: stopped")
	return nil
}
