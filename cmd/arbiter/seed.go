package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/arbiter-ledger/arbiter/services"
)

type seedCmd struct {
	Actions      int `default:"1000000" help:"How many synthetic actions to add (namespace seed)."`
	TimedOut     int `name:"timed-out" default:"10000" help:"How many of them are timed out."`
	LongTimeline int `name:"long-timeline" default:"1000" help:"Entries of one extra action with a long timeline."`
}

// Run fills the database with synthetic actions for benchmarks.
func (s *seedCmd) Run(ctx context.Context, c *cli, log *slog.Logger) error {
	st, err := openCurrent(ctx, c)
	if err != nil {
		return err
	}
	defer st.Close()
	req := servicesSeed(s)
	bar := newBar(int64(s.Actions), "seeding", "actions", true)
	req.Progress = bar.set
	res, err := st.Seed(ctx, req)
	bar.done()
	if err != nil {
		return err
	}
	fmt.Printf("seeded %d actions (%d timed out) in namespace %q in %s; long timeline: /actions/%s\n",
		s.Actions, s.TimedOut, res.Namespace, res.Took.Round(1e6), res.LongActionID)
	return nil
}

func servicesSeed(s *seedCmd) services.SeedRequest {
	return services.SeedRequest{Actions: s.Actions, TimedOut: s.TimedOut, LongTimeline: s.LongTimeline}
}
