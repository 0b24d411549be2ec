// Package client is the Go SDK for Arbiter, the action ledger for AI agents.
//
// It owns three things:
//
//   - A typed client for every route of the HTTP API ([Client]): entries,
//     actions, decisions and the admin webhook routes. Every answer that is
//     not a success is an [*Error] carrying the stable error code.
//   - The guard ([Client.Guard]): one call that wraps a side effect the safe
//     way. It records the intent under a key derived from the business
//     identity ([Key]) before anything happens, runs the function only when
//     the ledger answers proceed, keeps the lease alive with heartbeats, and
//     records the outcome for that attempt, retrying the report until it
//     lands. Retries of the same key are answered from the ledger.
//   - The worker ([Worker]): carries out operators' decisions. It picks up
//     actions an operator asked to retry or compensate and runs the handler
//     registered for their tool with the original key and params. For tools
//     with a lookup ([Worker.HandleLookup]) it looks before a resend: it
//     asks the downstream about each timed-out attempt and reports the
//     answer, so that the ledger confirms the action, retries it with its
//     key where that is safe, or leaves it to a person with the answer.
//
// The package depends on the standard library only.
package client
