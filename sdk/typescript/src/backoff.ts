/**
 * Exponential backoff with full jitter: the n-th pause (n from 0) is drawn
 * uniformly from [0, min(largestMs, firstMs·2ⁿ)], so clients that failed
 * together spread out instead of retrying in step.
 */
export interface Backoff {
  firstMs: number;
  largestMs: number;
}

/** The shared default (sdk/vectors.json): 200 ms, doubling up to 10 s. */
export const DEFAULT_BACKOFF: Backoff = { firstMs: 200, largestMs: 10_000 };

/** The upper bound of the n-th pause. */
export function backoffBound(b: Backoff, n: number): number {
  let bound = b.firstMs;
  for (let i = 0; i < n && bound < b.largestMs; i++) bound *= 2;
  return Math.max(0, Math.min(bound, b.largestMs));
}

/** The n-th pause, in milliseconds, drawn at random up to its bound. */
export function backoffPause(b: Backoff, n: number): number {
  return Math.random() * backoffBound(b, n);
}

/** Waits ms, or until signal aborts (then rejects with its reason). */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, Math.max(0, ms));
    const onAbort = () => {
      clearTimeout(t);
      reject(signal!.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
