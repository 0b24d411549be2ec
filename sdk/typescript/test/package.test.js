// The package as npm packs it: no runtime dependency, ESM with type
// declarations, nothing but the build and the README inside. run-tests
// installs the tarball into an empty project and runs every test against
// it; ARBITER_SDK_TARBALL names the tarball.

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

const tarball = process.env.ARBITER_SDK_TARBALL;
const entry = fileURLToPath(import.meta.resolve("@arbiter-ledger/arbiter"));
const root = dirname(fileURLToPath(import.meta.resolve("@arbiter-ledger/arbiter/package.json")));
const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));

test("no runtime dependencies", () => {
  for (const field of ["dependencies", "peerDependencies", "optionalDependencies", "bundleDependencies", "bundledDependencies"]) {
    assert.equal(pkg[field], undefined, `package.json has ${field}`);
  }
});

test("ESM with type declarations", async () => {
  assert.equal(pkg.type, "module");
  assert.ok(existsSync(join(root, pkg.exports["."].types)), "the declarations are in the package");
  assert.ok(existsSync(join(root, pkg.exports["."].default)));
  const m = await import("@arbiter-ledger/arbiter");
  for (const name of ["Client", "Worker", "key", "HeldError", "InProgressError", "KeyReusedError", "PendingApprovalError", "DeniedError", "UnreachableError", "retriable", "unknown"]) {
    assert.ok(m[name], `the package exports ${name}`);
  }
  const dts = readFileSync(join(root, pkg.exports["."].types), "utf8");
  assert.match(dts, /export \{ Client/);
});

test("the framework adapters are entry points of their own that import no framework at run time", async () => {
  for (const [entry, names] of [
    ["./ai-sdk", ["arbiterTool", "arbiterApprovals"]],
    ["./openai-agents", ["arbiterTool", "applyArbiterApprovals"]],
  ]) {
    assert.ok(existsSync(join(root, pkg.exports[entry].types)), `${entry} has declarations`);
    const m = await import(`@arbiter-ledger/arbiter/${entry.slice(2)}`);
    for (const name of names) assert.equal(typeof m[name], "function", `${entry} exports ${name}`);
  }
  // Every module of the build imports only its siblings (and node: built-ins):
  // no framework, no dependency, whichever entry point is loaded.
  const dist = join(root, "dist");
  let imports = 0;
  for (const f of readdirSync(dist).filter((f) => f.endsWith(".js"))) {
    const src = readFileSync(join(dist, f), "utf8");
    for (const m of src.matchAll(/(?:^|\n)\s*(?:import|export)\b[^;]*?from\s*["']([^"']+)["']|import\(\s*["']([^"']+)["']\s*\)/g)) {
      const spec = m[1] ?? m[2];
      assert.match(spec, /^(\.\/|node:)/, `dist/${f} imports ${spec}`);
      imports++;
    }
  }
  assert.ok(imports > 10, `only ${imports} imports found: the check reads nothing`);
  const core = readFileSync(join(dist, "index.js"), "utf8");
  assert.doesNotMatch(core, /ai-sdk|openai-agents|tools\.js/, "the core entry point does not load the adapters");
});

test("the tarball holds the build and the README, and the tests run against it", { skip: tarball ? false : "no ARBITER_SDK_TARBALL" }, () => {
  const files = execFileSync("tar", ["-tzf", tarball], { encoding: "utf8" }).trim().split("\n");
  for (const f of ["package/package.json", "package/README.md", "package/dist/index.js", "package/dist/index.d.ts"]) {
    assert.ok(files.includes(f), `${f} is in the tarball`);
  }
  assert.deepEqual(files.filter((f) => !/^package\/(package\.json|README\.md|dist\/)/.test(f)), []);
  const packed = JSON.parse(execFileSync("tar", ["-xOzf", tarball, "package/package.json"], { encoding: "utf8" }));
  assert.equal(packed.dependencies, undefined);
  assert.equal(packed.peerDependencies, undefined);
  assert.match(entry, /node_modules\/@arbiter-ledger\/arbiter\/dist\/index\.js$/, "the installed tarball, not the working tree");
});

// A path install of a fresh checkout (no dist/, no node_modules): npm runs
// the package's prepare, which builds it. ARBITER_SDK_SOURCE is the SDK's
// directory (run-tests sets it).
const source = process.env.ARBITER_SDK_SOURCE;
test("npm install /path/to/sdk/typescript of a fresh checkout builds it, and it imports", { skip: source ? false : "no ARBITER_SDK_SOURCE (run-tests sets it)", timeout: 180_000 }, () => {
  const work = mkdtempSync(join(tmpdir(), "arbiter-path-install-"));
  try {
    const checkout = join(work, "typescript");
    for (const f of ["package.json", "package-lock.json", "tsconfig.json", "README.md", "src"]) cpSync(join(source, f), join(checkout, f), { recursive: true });
    assert.ok(!existsSync(join(checkout, "dist")));
    const project = join(work, "project");
    mkdirSync(project);
    writeFileSync(join(project, "package.json"), JSON.stringify({ name: "path-install", private: true, type: "module" }));
    execFileSync("npm", ["install", "--no-audit", "--no-fund", "--loglevel=error", checkout], { cwd: project, stdio: "pipe" });
    const out = execFileSync(
      process.execPath,
      ["--input-type=module", "-e", 'const m = await import("@arbiter-ledger/arbiter"); const a = await import("@arbiter-ledger/arbiter/openai-agents"); console.log(typeof m.Client, typeof a.arbiterTool)'],
      { cwd: project, encoding: "utf8" },
    );
    assert.equal(out.trim(), "function function");
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
});
