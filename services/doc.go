// Package services owns Arbiter's business rules and all database access: the
// ledger and its state machine, decisions, the sweeper and retention, API keys
// and namespaces. It knows nothing of HTTP or HTML; callers pass typed request
// structs and get domain values or errors that carry a stable code.
package services
