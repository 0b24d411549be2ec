// Package webhooks owns alert delivery: the endpoints admins configure
// (webhooks.go), the dispatcher that claims the deliveries the ledger wrote
// in its outbox and sends them with Standard Webhooks signatures
// (dispatcher.go, signing.go), and the address policy that keeps the
// dispatcher off private networks (ssrf.go). It reads and writes through
// the store's driver and gorm; it never writes the ledger's tables.
package webhooks
