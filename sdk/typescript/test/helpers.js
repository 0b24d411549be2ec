// What the tests share: clients for the server sdk/with-server started,
// fresh keys and tools per test (the tests share one namespace and run in
// parallel), polling, and a TCP proxy the test controls to cut the network.

import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import net from "node:net";
import { fileURLToPath } from "node:url";
import { Client, key } from "@arbiter-ledger/arbiter";

const env = process.env;

/** Why server tests cannot run here, or "" when they can. */
export const noServer = env.ARBITER_URL
  ? ""
  : "no ARBITER_URL: run under sdk/with-server (sdk/typescript/run-tests does)";
if (noServer && env.ARBITER_SDK_REQUIRE_SERVER) {
  throw new Error(noServer);
}

/** A client with the given role's key (agent, operator, reader, admin) and fast retries. */
export function client(role = "agent", options = {}) {
  const apiKey = options.apiKey ?? env[`ARBITER_${role.toUpperCase()}_KEY`];
  return new Client(options.url ?? env.ARBITER_URL, apiKey, {
    backoff: { firstMs: 50, largestMs: 500 },
    timeoutMs: 10_000,
    ...options,
  });
}

/** A key and a tool no other test uses. */
export function fresh(what = "refund") {
  const id = randomUUID().slice(0, 8);
  return { key: key(what, `order-${id}`), tool: `ts.${what}.${id}` };
}

/** Resolves with fn's first truthy result, polling; rejects after timeoutMs. */
export async function poll(fn, { timeoutMs = 15_000, intervalMs = 50, what = "the condition" } = {}) {
  const deadline = Date.now() + timeoutMs;
  let last;
  for (;;) {
    last = await fn();
    if (last) return last;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs}ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/** Polls the action for key until its status is one of want; resolves with it. */
export function untilStatus(c, k, want, opts = {}) {
  const wanted = Array.isArray(want) ? want : [want];
  return poll(
    async () => {
      const a = await c.actionByKey(k).catch(() => null);
      return a && wanted.includes(a.status) ? a : null;
    },
    { what: `${k} to be ${wanted.join(" or ")}`, ...opts },
  );
}

/** sdk/vectors.json, shared by the Go, Python and TypeScript SDKs. */
export function vectors() {
  const path = env.ARBITER_SDK_VECTORS ?? fileURLToPath(new URL("../../vectors.json", import.meta.url));
  return JSON.parse(readFileSync(path, "utf8"));
}

/** A port nothing listens on. */
export async function closedPort() {
  const s = net.createServer();
  await new Promise((r) => s.listen(0, "127.0.0.1", r));
  const { port } = s.address();
  await new Promise((r) => s.close(r));
  return port;
}

/** A logger that keeps the worker's lines for assertions instead of printing them. */
export function memoryLogger() {
  const lines = [];
  return {
    lines,
    info: (message, fields) => lines.push({ level: "info", message, ...fields }),
    warn: (message, fields) => lines.push({ level: "warn", message, ...fields }),
  };
}

/**
 * A TCP proxy in front of the server. down() breaks every open connection
 * and refuses new ones (accepted, then reset) until up(); `dropped` counts
 * the refused connections.
 */
export class Proxy {
  #server;
  #sockets = new Set();
  #down = false;
  #onDrop = [];
  dropped = 0;

  static async start(target = env.ARBITER_URL) {
    const p = new Proxy();
    const { hostname, port } = new URL(target);
    p.#server = net.createServer((sock) => p.#accept(sock, hostname, Number(port)));
    await new Promise((r) => p.#server.listen(0, "127.0.0.1", r));
    p.url = `http://127.0.0.1:${p.#server.address().port}`;
    return p;
  }

  #accept(sock, host, port) {
    if (this.#down) {
      this.dropped++;
      sock.destroy();
      for (const f of this.#onDrop) f(this.dropped);
      return;
    }
    const up = net.connect(port, host);
    for (const s of [sock, up]) {
      this.#sockets.add(s);
      s.on("close", () => this.#sockets.delete(s));
      s.on("error", () => {
        sock.destroy();
        up.destroy();
      });
    }
    sock.pipe(up).pipe(sock);
  }

  down() {
    this.#down = true;
    for (const s of this.#sockets) s.destroy();
  }

  up() {
    this.#down = false;
  }

  /** Calls f(dropped) at every refused connection. */
  onDrop(f) {
    this.#onDrop.push(f);
  }

  async close() {
    this.down();
    await new Promise((r) => this.#server.close(r));
  }
}
