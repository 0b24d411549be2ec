// Package models holds the gorm structs of Arbiter's configuration records:
// namespaces, API keys, users and sessions, webhook endpoints and their
// deliveries. It has no logic and no queries: the schema lives in
// migrations/, and every read and write lives in services/. The ledger's own
// tables (actions, entries) have no structs here: the storage drivers write
// them in SQL of their own, and package record describes their rows.
package models
