// Package mcpgateway is Arbiter's MCP gateway: an MCP server to an agent's
// host and an MCP client to one upstream MCP server, which puts the ledger
// between the model and the upstream's tools without changing either.
//
// It owns:
//   - the configuration file (config.go): per tool, matched by name or
//     pattern, whether calls are guarded, the effect class, the lease, the
//     key template over the call's arguments, approval, the compensating
//     tool and the lookup tool with their argument mappings; resolved
//     against the upstream's tools at start (rules.go), so a mistake is an
//     error before the first call;
//   - the upstream connection (upstream.go), over stdio or streamable
//     HTTP, reconnected when it drops;
//   - what a tool call becomes (call.go) and what the model is told
//     (answers.go): a guarded call records its intent through the Go SDK's
//     Guard before the upstream sees it, and every answer of the ledger
//     (replay, held, pending approval, denied, …) becomes a result or a
//     tool error that says what happened;
//   - the worker (worker.go) that carries out operators' retries and
//     compensations on the upstream, and looks timed-out calls up there;
//   - forwarding of everything that is not a tool call (mirror.go):
//     prompts, resources, resource templates and completions.
//
// It talks to Arbiter only through the Go SDK in client/.
package mcpgateway
