import { backoffPause, sleep } from "./backoff.js";
import type { Client } from "./client.js";
import { LeaseLostError, isCode } from "./errors.js";
import type { Entry } from "./types.js";

/** Heartbeats extending an attempt's lease while its function runs. */
export interface Heartbeats {
  /**
   * Ends the heartbeats, waits for a beat in flight, and returns the error
   * that lost the lease, if any. May be called more than once.
   */
  stop(): Promise<unknown>;
}

/**
 * Sends `beat` about every third of the lease until stopped. When Arbiter
 * answers that the attempt may not continue (lease_lost, stale_attempt) it
 * stops and aborts `run` with a LeaseLostError. A beat that gets no answer
 * is sent again soon, with backoff: the function keeps running through a
 * short outage.
 */
export function startHeartbeats(client: Client, beat: Entry, leaseMs: number, run: AbortController): Heartbeats {
  const every = leaseMs / 3;
  const stopper = new AbortController();
  const onRunAbort = () => stopper.abort();
  run.signal.addEventListener("abort", onRunAbort, { once: true });
  let lost: unknown;

  const loop = (async () => {
    let next = every;
    let fails = 0;
    for (;;) {
      try {
        await sleep(next, stopper.signal);
      } catch {
        return;
      }
      // A beat may take up to two thirds of the lease: slow is still in
      // time, as long as it lands before the lease ends.
      const began = Date.now();
      const beatCtl = new AbortController();
      const onStop = () => beatCtl.abort(stopper.signal.reason);
      stopper.signal.addEventListener("abort", onStop, { once: true });
      const timer = setTimeout(() => beatCtl.abort(new Error("heartbeat got no answer in time")), leaseMs - every);
      let err: unknown;
      try {
        await client.submit(beat, { signal: beatCtl.signal });
      } catch (e) {
        err = e ?? new Error("heartbeat failed");
      } finally {
        clearTimeout(timer);
        stopper.signal.removeEventListener("abort", onStop);
      }
      if (stopper.signal.aborted) return;
      if (isCode(err, "lease_lost") || isCode(err, "stale_attempt")) {
        lost = err;
        run.abort(new LeaseLostError(err));
        return;
      }
      if (err !== undefined) {
        // Try again soon rather than a whole third later: the lease leaves
        // room for a short outage, not for waiting it out.
        fails++;
        next = Math.min(backoffPause(client.backoff, fails), every / 2);
      } else {
        fails = 0;
        next = Math.max(0, every - (Date.now() - began));
      }
    }
  })();

  return {
    async stop() {
      stopper.abort();
      await loop;
      run.signal.removeEventListener("abort", onRunAbort);
      return lost;
    },
  };
}
