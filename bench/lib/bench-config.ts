/**
 * The config of the bench's proxies (and `npm run profile`'s): long TTLs but for movements, which
 * keeps its shipped lifetime so that its pages expire and are refreshed while hits are measured
 * (BENCH_REFRESHING=0: nothing expires during a run), inbound limits on, shared through Redis and
 * never refusing, and the L1 lifetime of BENCH_L1_TTL when it is set.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { RESOURCE_NAMES, type ResourceName } from '../../src/catalog/resources.js';
import { BUILT_IN_CONFIG } from '../../src/config/schema.js';
import { envInt } from './env.js';

/**
 * Limits that never refuse, in windows of BENCH_LIMIT_WINDOW seconds: 60 by default, the shipped
 * policies' window (config/default.yaml); 1 makes every key's window start again each second, so
 * that each second's first hits of each key wait for Redis and its leases grow again from their
 * first batch.
 */
export const NEVER_REFUSING = { points: 10_000_000, duration: envInt('BENCH_LIMIT_WINDOW', 60, 1, 3600) } as const;
export const KEY_PREFIX = 'slab';

/** The `rateLimit:` section of a config whose inbound limits never refuse (NEVER_REFUSING for both). */
export function neverRefusingLimits(): string[] {
  const { points, duration } = NEVER_REFUSING;
  const policy = `{ points: ${String(points)}, duration: ${String(duration)} }`;
  return ['rateLimit:', `  perCredential: ${policy}`, `  perCompany: ${policy}`];
}

/**
 * The resource whose pages expire during the hit rounds, at its shipped lifetime (seconds), so that
 * hits are measured with refreshes running as in production; none with BENCH_REFRESHING=0.
 */
export const REFRESHING: { readonly resource: ResourceName; readonly ttl: number } | undefined =
  envInt('BENCH_REFRESHING', 1, 0, 1) === 0
    ? undefined
    : { resource: 'movements', ttl: BUILT_IN_CONFIG.cache.resources?.movements?.ttl ?? 10 };

/**
 * Writes the config file `name` in `dir` with the credential policy given (and an `upstream:` line,
 * when given, for the budget; `refreshing` false: no page expires during the run); returns its path.
 */
export function writeBenchConfig(
  dir: string,
  name: string,
  perCredential: { readonly points: number; readonly duration: number },
  keyPrefix = KEY_PREFIX,
  upstream?: string,
  refreshing = true,
): string {
  const expiring = refreshing ? REFRESHING : undefined;
  const l1Ttl = envInt('BENCH_L1_TTL', 0, 0, 3600);
  const file = join(dir, name);
  writeFileSync(
    file,
    [
      'cache:',
      `  keyPrefix: ${keyPrefix}`,
      '  defaults: { ttl: 3600, staleWhileRevalidate: 30, staleIfError: 600, notFoundTtl: 10 }',
      '  resources:',
      ...RESOURCE_NAMES.map((r) => `    ${r}: { ttl: ${String(r === expiring?.resource ? expiring.ttl : 3600)} }`),
      ...(l1Ttl === 0 ? [] : [`  l1: { maxBytes: 67108864, ttl: ${String(l1Ttl)} }`]),
      'rateLimit:',
      `  perCredential: { points: ${String(perCredential.points)}, duration: ${String(perCredential.duration)} }`,
      `  perCompany: { points: ${String(NEVER_REFUSING.points)}, duration: ${String(NEVER_REFUSING.duration)} }`,
      ...(upstream === undefined ? [] : [upstream]),
      '',
    ].join('\n'),
  );
  return file;
}
