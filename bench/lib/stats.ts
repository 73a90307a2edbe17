/**
 * Statistics for the bench and the load test: medians over rounds, and a latency histogram that
 * keeps every answer (no sampling) at microsecond resolution below 1 ms and within 0.1% above,
 * up to half an hour, in 12k counters: cheap to record per answer, and to keep one per second.
 */

/** The median of the finite values; NaN when there are none. */
export function median(values: readonly number[]): number {
  const sorted = values.filter((v) => Number.isFinite(v)).sort((a, b) => a - b);
  if (sorted.length === 0) return Number.NaN;
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? (sorted[mid] ?? Number.NaN) : ((sorted[mid - 1] ?? 0) + (sorted[mid] ?? 0)) / 2;
}

/** Values below this many µs have a bucket each. */
const EXACT_BELOW = 1024;
/** Buckets per power of two above that: 512, so a bucket is at most 1/512 of its value wide. */
const HALF = 512;
/** The largest value kept apart, µs (~35 min); longer ones count as this. */
const LARGEST_US = 2 ** 31 - 1;
const BUCKETS = EXACT_BELOW + (31 - 10) * HALF;

function bucketOf(us: number): number {
  if (us < EXACT_BELOW) return us;
  // v >> shift lands in [512, 1023]: the top 10 bits of the value.
  const shift = 31 - Math.clz32(us) - 9;
  return EXACT_BELOW + (shift - 1) * HALF + ((us >>> shift) - HALF);
}

/** The middle of a bucket's range, µs. */
function bucketValue(bucket: number): number {
  if (bucket < EXACT_BELOW) return bucket;
  const offset = bucket - EXACT_BELOW;
  const shift = Math.floor(offset / HALF) + 1;
  const low = ((offset % HALF) + HALF) * 2 ** shift;
  return low + (2 ** shift - 1) / 2;
}

/** Latencies of every answer, in ms as recorded, percentiles in ms. */
export class LatencyHistogram {
  readonly #counts = new Uint32Array(BUCKETS);
  #count = 0;
  #maxUs = 0;

  record(ms: number): void {
    const us = Math.min(LARGEST_US, Math.max(0, Math.round(ms * 1000)));
    const bucket = bucketOf(us);
    this.#counts[bucket] = (this.#counts[bucket] ?? 0) + 1;
    this.#count += 1;
    if (us > this.#maxUs) this.#maxUs = us;
  }

  /** Adds another histogram's answers to this one. */
  add(other: LatencyHistogram): void {
    other.#counts.forEach((n, bucket) => {
      if (n > 0) this.#counts[bucket] = (this.#counts[bucket] ?? 0) + n;
    });
    this.#count += other.#count;
    this.#maxUs = Math.max(this.#maxUs, other.#maxUs);
  }

  get count(): number {
    return this.#count;
  }

  get maxMs(): number {
    return this.#count === 0 ? Number.NaN : this.#maxUs / 1000;
  }

  /** The smallest recorded latency that at least p% of the answers do not exceed (NaN when empty). */
  percentileMs(p: number): number {
    if (this.#count === 0) return Number.NaN;
    const rank = Math.max(1, Math.ceil((p / 100) * this.#count));
    let seen = 0;
    for (let bucket = 0; bucket < BUCKETS; bucket++) {
      seen += this.#counts[bucket] ?? 0;
      if (seen >= rank) return Math.min(bucketValue(bucket), this.#maxUs) / 1000;
    }
    return this.#maxUs / 1000;
  }
}
