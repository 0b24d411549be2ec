// Type-level tests: `npm run test:types` (tsc --noEmit over this file)
// fails when a type the SDK promises is not the one it declares. Each
// assertion is an `Expect<Equal<…>>`; a line marked @ts-expect-error must
// not compile.

import { tool as aiTool } from "ai";
import { tool as agentsTool } from "@openai/agents";
import { z } from "zod";
import { Client, DeniedError, FrozenError, LimitExceededError, PendingApprovalError, key, type Action, type ApprovalLimit, type AuditProof, type Breaker, type BreakerState, type Freeze, type FreezeRef, type LedgerEntry, type Limit, type LimitCharge, type LimitUsage, type Outcome, type WebhookEventType } from "@arbiter-ledger/arbiter";
import { arbiterTool as aiArbiterTool } from "@arbiter-ledger/arbiter/ai-sdk";
import { arbiterTool as agentsArbiterTool } from "@arbiter-ledger/arbiter/openai-agents";

type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
type Expect<T extends true> = T;
const arbiter = new Client("http://127.0.0.1:8080", "ak_test");

// guard(): the outcome's result is what the function returns.
export async function guarded() {
  const out = await arbiter.guard({ key: key("refund", "o-1"), tool: "payments.refund" }, async () => ({ result: { refundId: "re_1", cents: 4200 }, externalRef: "re_1" }));
  type _1 = Expect<Equal<typeof out, Outcome<{ refundId: string; cents: number }>>>;
  type _2 = Expect<Equal<typeof out.result, { refundId: string; cents: number } | undefined>>;
  const none = await arbiter.guard({ key: "k", tool: "t" }, async () => {});
  type _3 = Expect<Equal<typeof none.result, unknown>>;
}

const Refund = z.object({ order: z.string(), amountCents: z.number() });
type Refund = z.infer<typeof Refund>;

// arbiterTool infers its input from the schema: no annotation on key, execute, requireApproval.
const aiParts = aiArbiterTool(arbiter, {
  schema: Refund,
  tool: "payments.refund",
  key: (input) => key("refund", input.order),
  requireApproval: (input) => input.amountCents > 10_000,
  execute: async (input, attempt) => ({ refundId: `re_${attempt.number}`, order: input.order }),
  externalRef: (out) => out.refundId,
});
type _4 = Expect<Equal<Parameters<typeof aiParts.execute>[0], Refund>>;
type _5 = Expect<Equal<Awaited<ReturnType<typeof aiParts.execute>>, { refundId: string; order: string } | string>>;
export const aiRefund = aiTool({ description: "Refund an order", ...aiParts });

const agentsParts = agentsArbiterTool(arbiter, {
  schema: Refund,
  tool: "payments.refund",
  key: (input) => key("refund", input.order),
  execute: async (input) => ({ refunded: input.amountCents }),
});
type _6 = Expect<Equal<Parameters<typeof agentsParts.execute>[0], Refund>>;
export const agentsRefund = agentsTool({ name: "refund", description: "Refund an order", ...agentsParts });

aiArbiterTool(arbiter, {
  schema: Refund,
  tool: "payments.refund",
  // @ts-expect-error: the schema has no field "orderId"
  key: (input) => key("refund", input.orderId),
  execute: async () => ({}),
});

// Without a schema, the input is what the callbacks declare.
const declared = aiArbiterTool(arbiter, {
  tool: "payments.refund",
  key: (input: { order: string }) => key("refund", input.order),
  execute: async () => 1,
});
type _7 = Expect<Equal<Parameters<typeof declared.execute>[0], { order: string }>>;

// Limits across actions: the client's methods and what a limit's denial carries.
export async function limits(err: LimitExceededError) {
  const l = await arbiter.createLimit({ name: "refunds", namespace: "payments", tools: ["payments.refund"], amount: "params.amount", group_by: "params.customer", window: 3600, max: 100, over: "deny" });
  type _8 = Expect<Equal<typeof l, Limit>>;
  type _9 = Expect<Equal<typeof l.over, "hold" | "deny">>;
  type _10 = Expect<Equal<typeof l.mode, "enforce" | "shadow">>;
  type _11 = Expect<Equal<Awaited<ReturnType<typeof arbiter.limits>>, Limit[]>>;
  type _12 = Expect<Equal<Awaited<ReturnType<typeof arbiter.limitVersions>>, Limit[]>>;
  type _13 = Expect<Equal<Awaited<ReturnType<typeof arbiter.limitUsage>>, LimitUsage>>;
  type _14 = Expect<Equal<Awaited<ReturnType<typeof arbiter.deleteLimit>>, void>>;
  type _15 = Expect<Equal<typeof err.limits, ApprovalLimit[]>>;
  const denied: DeniedError = err; // a limit's denial is a denial
  void denied;
  type _16 = Expect<Equal<Action["limits"], LimitCharge[] | null>>;
  await arbiter.updateLimit(l.id, { max: 150, mode: "shadow" });
  await arbiter.limitUsage(l.id, { group: "cus_1" });
  // @ts-expect-error: over is hold or deny
  await arbiter.updateLimit(l.id, { over: "block" });
}

// Freezes and breakers: the client's methods, what a frozen answer and a frozen hold carry.
export async function freezes(frozen: FrozenError, pending: PendingApprovalError) {
  const f = await arbiter.startFreeze({ namespace: "payments", tools: ["payments.*"], reason: "provider incident" });
  type _17 = Expect<Equal<typeof f, Freeze>>;
  type _18 = Expect<Equal<Awaited<ReturnType<typeof arbiter.liftFreeze>>, Freeze>>;
  type _19 = Expect<Equal<Awaited<ReturnType<typeof arbiter.freezes>>, Freeze[]>>;
  type _20 = Expect<Equal<typeof f.lifted_at, string | null>>;
  type _21 = Expect<Equal<typeof frozen.retryAfter, number>>;
  type _22 = Expect<Equal<typeof pending.frozenBy, FreezeRef[]>>;
  type _23 = Expect<Equal<Action["approval"] extends infer A ? (A extends { frozen_by: infer F } ? F : never) : never, FreezeRef[]>>;
  await arbiter.freezes({ namespace: "payments", active: true });
  await arbiter.liftFreeze(f.id, "the provider is back");
  // @ts-expect-error: a freeze needs a reason
  await arbiter.startFreeze({ namespace: "payments" });
  await arbiter.guard({ key: key("refund", "o-1"), tool: "payments.refund", frozenWaitMs: 30_000 }, () => undefined);

  const b = await arbiter.createBreaker({ name: "mailer", namespace: "payments", tools: ["mail.*"], max_unknown_ratio: 0.3 });
  type _24 = Expect<Equal<typeof b, Breaker>>;
  type _25 = Expect<Equal<typeof b.state, BreakerState | undefined>>;
  type _26 = Expect<Equal<typeof b.max_failure_ratio, number | null>>;
  type _27 = Expect<Equal<Awaited<ReturnType<typeof arbiter.breakers>>, Breaker[]>>;
  type _28 = Expect<Equal<Awaited<ReturnType<typeof arbiter.breakerVersions>>, Breaker[]>>;
  type _29 = Expect<Equal<Awaited<ReturnType<typeof arbiter.deleteBreaker>>, void>>;
  await arbiter.updateBreaker(b.id, { window: 600 });
  await arbiter.breakers({ namespace: "payments" });
}

// The evidence log: text answers are strings, a proof is an AuditProof.
export async function evidence(entry: LedgerEntry) {
  type _30 = Expect<Equal<Awaited<ReturnType<typeof arbiter.auditKey>>, string>>;
  type _31 = Expect<Equal<Awaited<ReturnType<typeof arbiter.auditCheckpoint>>, string>>;
  const p = await arbiter.auditProof(entry.id, { size: 42 });
  type _32 = Expect<Equal<typeof p, AuditProof>>;
  type _33 = Expect<Equal<typeof p.inclusion, string[]>>;
  type _34 = Expect<Equal<Awaited<ReturnType<typeof arbiter.auditConsistency>>, string[]>>;
  type _35 = Expect<Equal<Awaited<ReturnType<typeof arbiter.auditExport>>, string>>;
  type _36 = Expect<Equal<typeof entry.log_index, number | undefined>>;
  await arbiter.auditExport("payments", { since: new Date(), until: "2026-12-01T00:00:00Z" });
  // @ts-expect-error: a bundle is of one namespace
  await arbiter.auditExport();
  // Each new checkpoint, and a self-check's mismatch, as alerts.
  const alerts: WebhookEventType[] = ["audit.checkpoint", "audit.mismatch"];
  await arbiter.createWebhook({ url: "https://siem.example/arbiter", event_types: alerts });
  // @ts-expect-error: not an alert
  await arbiter.createWebhook({ url: "https://siem.example/arbiter", event_types: ["audit.checkpointed"] });
}
