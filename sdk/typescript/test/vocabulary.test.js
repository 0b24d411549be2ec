// The vocabulary of src/types.ts is web/openapi.json's: each string union
// of the SDK lists exactly the values of the enum it stands for, so a value
// added on either side and forgotten on the other fails here. The test
// reads the SDK's source (ARBITER_SDK_SOURCE, or the checkout this file is
// in) and the OpenAPI document beside it in the repository.

import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const source = process.env.ARBITER_SDK_SOURCE ?? fileURLToPath(new URL("..", import.meta.url));
const typesTs = readFileSync(join(source, "src", "types.ts"), "utf8");
const openapi = JSON.parse(readFileSync(join(source, "..", "..", "web", "openapi.json"), "utf8"));

/** The string literals of a union written as source text, in order. */
function literals(text) {
  return [...text.matchAll(/"([^"]*)"/g)].map((m) => m[1]);
}

/** The members of `export type name = "a" | "b" …;`. */
function union(name) {
  const m = typesTs.match(new RegExp(`export type ${name} =([^;]*);`));
  assert.ok(m, `src/types.ts has no export type ${name}`);
  return literals(m[1]);
}

/** The members of the union typed inline on a field of an interface. */
function field(iface, name) {
  const body = typesTs.match(new RegExp(`export interface ${iface} \\{([\\s\\S]*?)\\n\\}`));
  assert.ok(body, `src/types.ts has no interface ${iface}`);
  const m = body[1].match(new RegExp(`\\n\\s*${name}\\??: ([^;]*);`));
  assert.ok(m, `interface ${iface} has no field ${name}`);
  return literals(m[1]);
}

/** The enum at components.schemas.<schema>(.properties.<prop>)*. */
function schemaEnum(schema, ...props) {
  let node = openapi.components.schemas[schema];
  for (const p of props) node = node?.properties?.[p];
  assert.ok(node?.enum, `web/openapi.json has no enum at ${[schema, ...props].join(".")}`);
  return node.enum;
}

const pairs = [
  ["Status", () => union("Status"), () => schemaEnum("Status")],
  ["Effect", () => union("Effect"), () => schemaEnum("Effect")],
  ["EntryType", () => union("EntryType"), () => schemaEnum("EntryInput", "type")],
  ["Outcome", () => union("Outcome"), () => schemaEnum("EntryResult", "outcome")],
  ["Answer", () => union("Answer"), () => schemaEnum("LookupAnswer", "answer")],
  ["Answer (in an entry)", () => union("Answer"), () => schemaEnum("EntryInput", "answer")],
  ["DecisionName", () => union("DecisionName"), () => schemaEnum("DecisionInput", "decision")],
  ["DecisionName (in a webhook)", () => union("DecisionName"), () => schemaEnum("WebhookDecision", "decision")],
  ["WebhookEventType", () => union("WebhookEventType"), () => schemaEnum("WebhookEventType")],
  ["ErrorCode", () => union("ErrorCode"), () => schemaEnum("ErrorDetail", "code")],
  ["Mode (of a policy)", () => union("Mode"), () => schemaEnum("Policy", "mode")],
  ["Mode (of a policy's input)", () => union("Mode"), () => schemaEnum("PolicyInput", "mode")],
  ["Mode (of a limit)", () => union("Mode"), () => schemaEnum("Limit", "mode")],
  ["Mode (of a limit's input)", () => union("Mode"), () => schemaEnum("LimitInput", "mode")],
  ["LimitOver", () => union("LimitOver"), () => schemaEnum("Limit", "over")],
  ["LimitOver (in a limit's input)", () => union("LimitOver"), () => schemaEnum("LimitInput", "over")],
  ["Actor.kind", () => field("Actor", "kind"), () => schemaEnum("Actor", "kind")],
  ["Webhook.format", () => field("Webhook", "format"), () => schemaEnum("WebhookFormat")],
  ["WebhookInput.format", () => field("WebhookInput", "format"), () => schemaEnum("WebhookFormat")],
  ["Delivery.state", () => field("Delivery", "state"), () => schemaEnum("WebhookDelivery", "state")],
];

for (const [name, sdk, contract] of pairs) {
  test(`vocabulary: ${name} is web/openapi.json's enum, value for value`, () => {
    const ours = sdk();
    const theirs = contract();
    assert.ok(ours.length > 0, `${name} has no values`);
    assert.deepEqual(
      { missingInSdk: theirs.filter((v) => !ours.includes(v)), missingInOpenAPI: ours.filter((v) => !theirs.includes(v)) },
      { missingInSdk: [], missingInOpenAPI: [] },
    );
    assert.deepEqual(ours, theirs, `${name}: same values, in the contract's order`);
  });
}
