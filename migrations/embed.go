// Package migrations embeds the versioned SQL schema of each dialect. Files
// are applied in order by goose (`arbiter migrate`); the schema is never
// changed implicitly.
package migrations

import "embed"

// Postgres holds postgres/*.sql; SQLite holds sqlite/*.sql.
var (
	//go:embed postgres/*.sql
	Postgres embed.FS
	//go:embed sqlite/*.sql
	SQLite embed.FS
)
