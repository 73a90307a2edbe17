/**
 * Pauses after an upstream 429 (docs/limits.md#the-upstream-guard): the upstream's `Retry-After` stops upstream calls for
 * that company on every replica until it passes (a Redis key, mirrored in process; in process
 * only while Redis is unavailable). When it passes, one request probes (a Redis `SET NX` lease):
 * the others keep being told to wait until the probe succeeds, so a pause never ends in a storm.
 */
import type { RedisClient } from '../platform/redis/connection.js';
import type { RedisHealth } from '../platform/redis/health.js';

export type PauseCheck =
  | { readonly kind: 'go'; readonly probe: boolean }
  | { readonly kind: 'paused'; readonly retryAfterMs: number };

export interface UpstreamPause {
  check(company: string): Promise<PauseCheck>;
  pause(company: string, ms: number): Promise<void>;
  /** After a successful probe: the company's upstream calls resume everywhere. */
  resume(company: string): Promise<void>;
}

export interface UpstreamPauseOptions {
  readonly redis?: { readonly client: RedisClient; readonly health: RedisHealth; readonly prefix: string } | undefined;
  /** How long a probe may take before another request may probe, ms. */
  readonly probeMs: number;
  readonly now?: () => number;
}

const GO: PauseCheck = { kind: 'go', probe: false };
const PROBE: PauseCheck = { kind: 'go', probe: true };
/** What a request is told while another one probes. */
const WHILE_PROBING: PauseCheck = { kind: 'paused', retryAfterMs: 1_000 };

export function createUpstreamPause(options: UpstreamPauseOptions): UpstreamPause {
  const now = options.now ?? Date.now;
  /** company → until (ms), and whether a local probe is out. */
  const local = new Map<string, { until: number; probing: boolean; probeSince: number }>();

  function checkLocally(company: string): PauseCheck {
    const entry = local.get(company);
    if (entry === undefined) return GO;
    const at = now();
    if (at < entry.until) return { kind: 'paused', retryAfterMs: entry.until - at };
    if (entry.probing && at - entry.probeSince < options.probeMs) return WHILE_PROBING;
    entry.probing = true;
    entry.probeSince = at;
    return PROBE;
  }

  const redis = options.redis;
  // `{company}` is a hash tag: the pause and its probe share a Redis Cluster slot, so that one DEL
  // may name both (a CROSSSLOT error otherwise).
  const keyOf = (company: string): string => `${redis?.prefix ?? ''}:pause:{${company}}`;

  return {
    async check(company) {
      const known = local.get(company);
      if (known !== undefined && now() < known.until) return { kind: 'paused', retryAfterMs: known.until - now() };
      if (redis === undefined || !redis.health.usable(keyOf(company))) return checkLocally(company);
      try {
        const until = await redis.client.get(keyOf(company));
        if (until === null) {
          local.delete(company);
          return GO;
        }
        const at = now();
        if (at < Number(until)) {
          local.set(company, { until: Number(until), probing: false, probeSince: 0 });
          return { kind: 'paused', retryAfterMs: Number(until) - at };
        }
        const probe = await redis.client.set(`${keyOf(company)}:probe`, '1', 'PX', options.probeMs, 'NX');
        return probe === 'OK' ? PROBE : WHILE_PROBING;
      } catch (error) {
        redis.health.failed(keyOf(company), error);
        return checkLocally(company);
      }
    },
    async pause(company, ms) {
      const until = now() + ms;
      local.set(company, { until, probing: false, probeSince: 0 });
      if (redis === undefined || !redis.health.usable(keyOf(company))) return;
      try {
        // Kept past `until` by one probe's time: its presence then means "probe first".
        await redis.client.set(keyOf(company), String(until), 'PX', ms + options.probeMs);
        await redis.client.del(`${keyOf(company)}:probe`);
      } catch (error) {
        redis.health.failed(keyOf(company), error);
      }
    },
    async resume(company) {
      local.delete(company);
      if (redis === undefined || !redis.health.usable(keyOf(company))) return;
      try {
        await redis.client.del(keyOf(company), `${keyOf(company)}:probe`);
      } catch (error) {
        redis.health.failed(keyOf(company), error);
      }
    },
  };
}
