package services

import (
	"context"
	"fmt"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/database"
)

// SchemaStatus says how the database's schema compares to this binary's.
type SchemaStatus struct {
	Current int64 // newest applied migration, 0 for an empty database
	Latest  int64 // newest migration this binary carries
}

// UpToDate reports whether every migration has been applied.
func (st SchemaStatus) UpToDate() bool { return st.Current >= st.Latest }

func (s *Store) provider() (*goose.Provider, error) {
	m, err := s.drv.Migrator()
	if err != nil {
		return nil, fmt.Errorf("store: migrations: %w", err)
	}
	var opts []goose.ProviderOption
	if m.Lock != nil {
		opts = append(opts, goose.WithSessionLocker(m.Lock))
	}
	p, err := goose.NewProvider(database.Dialect(m.GooseDialect), m.DB, s.drv.Migrations(), opts...)
	if err != nil {
		return nil, fmt.Errorf("store: migrations: %w", err)
	}
	return p, nil
}

// Schema reports the applied and the latest schema version.
func (s *Store) Schema(ctx context.Context) (SchemaStatus, error) {
	p, err := s.provider()
	if err != nil {
		return SchemaStatus{}, err
	}
	cur, err := p.GetDBVersion(ctx)
	if err != nil {
		return SchemaStatus{}, fmt.Errorf("%w: store: read schema version: %v", ErrUnavailable, err)
	}
	srcs := p.ListSources()
	var latest int64
	if len(srcs) > 0 {
		latest = srcs[len(srcs)-1].Version
	}
	return SchemaStatus{Current: cur, Latest: latest}, nil
}

// Migrate applies every pending migration and returns the versions applied.
func (s *Store) Migrate(ctx context.Context) ([]int64, error) {
	p, err := s.provider()
	if err != nil {
		return nil, err
	}
	res, err := p.Up(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: migrate: %w", err)
	}
	applied := make([]int64, 0, len(res))
	for _, r := range res {
		applied = append(applied, r.Source.Version)
	}
	return applied, nil
}

// MigrateTo applies the pending migrations up to and including version, for
// tests that check what a migration does to data written before it.
func (s *Store) MigrateTo(ctx context.Context, version int64) error {
	p, err := s.provider()
	if err != nil {
		return err
	}
	if _, err := p.UpTo(ctx, version); err != nil {
		return fmt.Errorf("store: migrate to %d: %w", version, err)
	}
	return nil
}
