// Package services owns the ledger and what every service builds on. The
// ledger: entries and decisions decided by the rules table (machine.go) and
// written by one path (commit.go), group commit, the sweeper and retention,
// the triage queue and the reads of actions. What the other services build
// on: the Store (a storage driver chosen by the database URL, and gorm for
// configuration records), migrations, the principal, and errors that carry
// a stable code. It knows nothing of HTTP or HTML; callers pass typed
// request structs and get domain values or errors.
//
// Beside it, services/webhooks owns alert delivery and services/accounts
// users, sessions, namespaces and API keys; both import this package, never
// the other way round. services/driver is the storage seam and
// services/record the shared vocabulary.
package services
