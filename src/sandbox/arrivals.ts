/**
 * What the sandbox counts of the API requests it receives (docs/sandbox.md): how many, how many at
 * once, how many per second, by target, and each arrival's time; how many were conditional and how
 * many it answered 304; the bytes it sent. The tests read these to judge what reached the upstream
 * and what came back (`GET /__sandbox/stats`, `Sandbox.stats()`).
 */

export interface SandboxStats {
  /** API requests received (every status). */
  served: number;
  inFlight: number;
  maxInFlight: number;
  /** Most API requests started within one wall-clock second. */
  maxPerSecond: number;
  /** Most API requests started within any 1 000 ms (a sliding window: stricter than the above). */
  maxPerSlidingSecond: number;
  /** API requests started in each wall-clock second (epoch seconds → count), the last 600. */
  startsBySecond: Record<string, number>;
  rateLimited: number;
  /** Requests received per path (with query), for tests that count one key's fetches. */
  byTarget: Record<string, number>;
  /** API requests that carried `If-None-Match` or `If-Modified-Since`. */
  conditional: number;
  /** API requests answered 304 Not Modified (no body). */
  notModified: number;
  /** Bytes of the API answers' bodies sent (HEAD and 304 send none). */
  bodyBytes: number;
  /** Bytes of the API answers on the wire: status lines, header fields and bodies. */
  responseBytes: number;
  /**
   * Every API request's arrival (ms since the epoch, to the µs) and the requests in flight with it, the last
   * 20 000: for tests that judge phases of one run apart.
   */
  arrivals: Array<{ at: number; inFlight: number }>;
}

const MAX_ARRIVALS = 20_000;
/** Seconds kept in `startsBySecond`. */
const MAX_SECONDS = 600;

function emptyStats(): SandboxStats {
  return {
    served: 0,
    inFlight: 0,
    maxInFlight: 0,
    maxPerSecond: 0,
    maxPerSlidingSecond: 0,
    startsBySecond: {},
    rateLimited: 0,
    byTarget: {},
    conditional: 0,
    notModified: 0,
    bodyBytes: 0,
    responseBytes: 0,
    arrivals: [],
  };
}

/**
 * Starts within the current wall-clock second. The rate limit reads it too, so a reset of the
 * statistics leaves it as it is.
 */
class SecondWindow {
  #second = 0;
  #count = 0;

  /** Counts a start now and answers the second and the starts within it. */
  count(): { readonly second: number; readonly count: number } {
    const second = Math.floor(Date.now() / 1000);
    if (second !== this.#second) {
      this.#second = second;
      this.#count = 0;
    }
    this.#count += 1;
    return { second, count: this.#count };
  }

  get current(): number {
    return this.#count;
  }
}

/** Start times (ms) within the last 1 000 ms, oldest first. */
class SlidingSecond {
  #starts: number[] = [];

  /** Counts a start at `at` and answers the starts within the 1 000 ms up to it. */
  add(at: number): number {
    const starts = this.#starts;
    starts.push(at);
    while (starts.length > 0 && (starts[0] ?? at) <= at - 1_000) starts.shift();
    return starts.length;
  }

  clear(): void {
    this.#starts = [];
  }
}

/** The counters of `SandboxStats`, kept as requests arrive and end. */
export class ArrivalRecorder {
  #stats = emptyStats();
  readonly #thisSecond = new SecondWindow();
  readonly #lastSecond = new SlidingSecond();

  /** Counts an API request that has just arrived, for `target` (its path and query). */
  arrived(target: string, conditional: boolean): void {
    const stats = this.#stats;
    stats.served += 1;
    if (conditional) stats.conditional += 1;
    stats.inFlight += 1;
    stats.maxInFlight = Math.max(stats.maxInFlight, stats.inFlight);
    stats.byTarget[target] = (stats.byTarget[target] ?? 0) + 1;
    const { second, count } = this.#thisSecond.count();
    stats.maxPerSecond = Math.max(stats.maxPerSecond, count);
    stats.startsBySecond[String(second)] = count;
    const seconds = Object.keys(stats.startsBySecond);
    if (seconds.length > MAX_SECONDS) delete stats.startsBySecond[seconds[0] ?? ''];
    const at = performance.now();
    stats.maxPerSlidingSecond = Math.max(stats.maxPerSlidingSecond, this.#lastSecond.add(at));
    stats.arrivals.push({ at: performance.timeOrigin + at, inFlight: stats.inFlight });
    if (stats.arrivals.length > MAX_ARRIVALS) stats.arrivals.splice(0, stats.arrivals.length - MAX_ARRIVALS);
  }

  /** Its answer has ended (or its connection closed). */
  ended(): void {
    this.#stats.inFlight -= 1;
  }

  /** Its answer was sent whole: its status, its body's bytes and its bytes on the wire. */
  answered(status: number, bodyBytes: number, responseBytes: number): void {
    const stats = this.#stats;
    if (status === 304) stats.notModified += 1;
    stats.bodyBytes += bodyBytes;
    stats.responseBytes += responseBytes;
  }

  rateLimited(): void {
    this.#stats.rateLimited += 1;
  }

  /** API requests started within the current wall-clock second (what the rate limit counts). */
  get startsThisSecond(): number {
    return this.#thisSecond.current;
  }

  /** A copy: the caller may keep it while requests go on. */
  snapshot(): SandboxStats {
    return structuredClone(this.#stats);
  }

  /** The counters as JSON, for the control API's answer (serialised at once, so not copied). */
  toJSON(): SandboxStats {
    return this.#stats;
  }

  reset(): void {
    this.#stats = emptyStats();
    this.#lastSecond.clear();
  }
}
