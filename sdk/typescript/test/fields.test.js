// The records of src/types.ts have web/openapi.json's fields: each
// interface the SDK reads or sends has exactly the properties of its
// schema, optional (`?`) exactly where the schema does not require them,
// and admitting null exactly where the schema's value may be null. So a
// column added to the API and forgotten here, or a field the API never
// sends, fails. The test reads the SDK's source (ARBITER_SDK_SOURCE, or the
// checkout this file is in) and the OpenAPI document beside it.

import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const source = process.env.ARBITER_SDK_SOURCE ?? fileURLToPath(new URL("..", import.meta.url));
const typesTs = readFileSync(join(source, "src", "types.ts"), "utf8");
const openapi = JSON.parse(readFileSync(join(source, "..", "..", "web", "openapi.json"), "utf8"));

/**
 * The fields of `export interface name { … }`, as { name: { optional,
 * type } }: its lines at the interface's own indentation, comments left
 * out (a type written inline over several lines is indented deeper).
 */
function fields(iface) {
  const body = typesTs.match(new RegExp(`export interface ${iface} \\{([\\s\\S]*?)\\n\\}`));
  assert.ok(body, `src/types.ts has no interface ${iface}`);
  const text = body[1].replace(/\/\*[\s\S]*?\*\//g, "").replace(/\/\/.*$/gm, "");
  const out = {};
  for (const m of text.matchAll(/^ {2}(\w+)(\?)?: (.*?);?\s*$/gm)) {
    out[m[1]] = { optional: m[2] === "?", type: m[3] };
  }
  assert.ok(Object.keys(out).length > 0, `interface ${iface} has no fields`);
  return out;
}

/** Whether a schema property's value may be null (no type at all is any JSON). */
function nullable(prop) {
  if (Array.isArray(prop.type)) return prop.type.includes("null");
  if (prop.type !== undefined) return prop.type === "null";
  if (prop.oneOf) return prop.oneOf.some((alt) => alt.type === "null");
  return prop.$ref === undefined;
}

/** Whether a TypeScript type, as written, admits null. */
function admitsNull(type) {
  return /(^|\|)\s*(null|unknown|any)\s*($|\|)/.test(type);
}

// Each interface of the SDK and the schema it stands for.
const pairs = [
  ["Action", "Action"],
  ["LedgerEntry", "Entry"],
  ["Entry", "EntryInput"],
  ["EntryResult", "EntryResult"],
  ["Actor", "Actor"],
  ["Approval", "Approval"],
  ["Reconciliation", "Reconciliation"],
  ["LookupAnswerRecord", "LookupAnswer"],
  ["ErrorDetail", "ErrorDetail"],
  ["Policy", "Policy"],
  ["PolicyInput", "PolicyInput"],
  ["Limit", "Limit"],
  ["LimitInput", "LimitInput"],
  ["LimitCharge", "LimitCharge"],
  ["ApprovalLimit", "ApprovalLimit"],
  ["LimitUsage", "LimitUsage"],
  ["GroupUsage", "GroupUsage"],
  ["AuditProof", "AuditProof"],
];

for (const [iface, schemaName] of pairs) {
  test(`fields: ${iface} has the properties of web/openapi.json's ${schemaName}`, () => {
    const schema = openapi.components.schemas[schemaName];
    assert.ok(schema?.properties, `web/openapi.json has no schema ${schemaName}`);
    const ours = fields(iface);
    const required = new Set(schema.required ?? []);
    assert.deepEqual(
      {
        missingInSdk: Object.keys(schema.properties).filter((p) => !(p in ours)),
        missingInOpenAPI: Object.keys(ours).filter((p) => !(p in schema.properties)),
      },
      { missingInSdk: [], missingInOpenAPI: [] },
    );
    for (const [name, prop] of Object.entries(schema.properties)) {
      const f = ours[name];
      assert.equal(f.optional, !required.has(name), `${iface}.${name}: optional exactly when ${schemaName} does not require it`);
      assert.equal(admitsNull(f.type), nullable(prop), `${iface}.${name} (${f.type}): null exactly when ${schemaName}.${name} may be null`);
    }
  });
}
