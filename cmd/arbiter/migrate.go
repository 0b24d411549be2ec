package main

import (
	"context"
	"fmt"
	"log/slog"
)

type migrateCmd struct{}

func (migrateCmd) Run(ctx context.Context, c *cli, log *slog.Logger) error {
	st, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	applied, err := st.Migrate(ctx)
	if err != nil {
		return err
	}
	status, err := st.Schema(ctx)
	if err != nil {
		return err
	}
	if len(applied) == 0 {
		fmt.Printf("schema of %s is up to date (version %d)\n", st.Where, status.Current)
		return nil
	}
	fmt.Printf("applied %d migration(s) to %s; schema is now at version %d\n", len(applied), st.Where, status.Current)
	return nil
}
