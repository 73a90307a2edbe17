/**
 * Revalidation under a refresh-heavy load (docs/cache.md#revalidation): a few large pages with a
 * one-second TTL, asked at a steady rate through a proxy process (one `redis-server` behind it),
 * so that every page is refreshed about once a second, in the background. Run once with the
 * sandbox's validators on (each refresh a conditional request, answered 304) and once with them
 * off (each refresh a full 200, the same body: freshened, not stored again). What the round
 * measures: what the sandbox sent (bodies, and bytes on the wire), what Redis received, the
 * proxy's CPU (user + system, /proc), and the proxy's own count of revalidations by result. A round
 * may run another build's proxy instead (`mainJs`: one from before revalidation, which stores every
 * refresh whole), for the comparison.
 */

import { writeFileSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { brotliBody, encodeEntry, storedPrefix, strongEtag } from '../../src/cache/entry/entry.js';
import { mintDevToken } from '../../src/cli/dev-credentials.js';
import { API_PREFIX } from '../../src/sandbox/resources.js';
import { processCpuUs } from '../lib/cpu.js';
import { get, sandboxControl } from '../lib/http.js';
import { stop } from '../lib/processes.js';
import { type RedisTopology, startProxy, startSandbox } from '../lib/services.js';

/** A round's proxy and upstream: the sandbox's validators on or off, and which build's proxy. */
export interface RevalidationMode {
  readonly label: string;
  readonly validators: boolean;
  /** Another build's entry point; default this one's dist/main.js. */
  readonly mainJs?: string | undefined;
}

export interface RevalidationSettings {
  readonly secret: string;
  readonly redis: RedisTopology & { readonly url: string };
  readonly workDir: string;
  /** Seconds of load. */
  readonly seconds: number;
  /** Requests per second, all pages together. */
  readonly rate: number;
  /** Pages asked in turn (at most `MAX_PAGES`). */
  readonly pages: number;
  readonly proxyCpu?: number;
  readonly sandboxCpu?: number;
}

export interface RevalidationFigures {
  readonly mode: string;
  readonly requests: number;
  /** Answers that were not 200 (none expected). */
  readonly failed: number;
  /** Requests that reached the sandbox, of them conditional, and its 304s. */
  readonly upstream: number;
  readonly conditional: number;
  readonly notModified: number;
  /** What the sandbox sent: bodies, and whole answers on the wire. */
  readonly upstreamBodyBytes: number;
  readonly upstreamWireBytes: number;
  /** What Redis received from every client (its `total_net_input_bytes`). */
  readonly redisInputBytes: number;
  readonly proxyCpuMs: number;
  /**
   * What one refresh writes to Redis, on average over the pages: a save's value (the entry, its
   * body in brotli), or a freshen's arguments by SHA (the key, the stored prefix, 24 bytes of times).
   */
  readonly saveBytes: number;
  readonly freshenBytes: number;
  /** The proxy's `slab_proxy_revalidations_total`, by result. */
  readonly revalidations: Readonly<Record<'not_modified' | 'identical' | 'modified', number>>;
}

/** Pages of company 1's movements: per_page from 100 (the largest page) down, one record less each. */
export const MAX_PAGES = 90;

export function revalidationPages(count: number): string[] {
  return Array.from(
    { length: Math.min(count, MAX_PAGES) },
    (_, i) => `${API_PREFIX}/movements?per_page=${String(100 - i)}`,
  );
}

function writeConfig(dir: string): string {
  const file = join(dir, 'revalidation.yaml');
  writeFileSync(
    file,
    [
      'cache:',
      '  keyPrefix: benchrv',
      '  defaults: { ttl: 1, staleWhileRevalidate: 10, staleIfError: 60, notFoundTtl: 1 }',
      '  resources:',
      '    movements: { ttl: 1 }',
      'rateLimit:',
      '  perCredential: { points: 10000000, duration: 1 }',
      '  perCompany: { points: 10000000, duration: 1 }',
      '',
    ].join('\n'),
  );
  return file;
}

async function redisInputBytes(redis: Redis): Promise<number> {
  const info = await redis.info('stats');
  return Number(/total_net_input_bytes:(\d+)/.exec(info)?.[1] ?? Number.NaN);
}

async function revalidationCounts(adminUrl: string): Promise<RevalidationFigures['revalidations']> {
  const text = (await get(`${adminUrl}/metrics`)).body.toString('utf8');
  const count = (result: string): number =>
    Number(new RegExp(`^slab_proxy_revalidations_total\\{result="${result}"\\} (\\S+)$`, 'm').exec(text)?.[1] ?? 0);
  return { not_modified: count('not_modified'), identical: count('identical'), modified: count('modified') };
}

interface SandboxCounts {
  readonly served: number;
  readonly conditional: number;
  readonly notModified: number;
  readonly bodyBytes: number;
  readonly responseBytes: number;
}

async function sandboxCounts(url: string): Promise<SandboxCounts> {
  const stats = (await sandboxControl(url, 'GET', 'stats')) as Partial<Record<keyof SandboxCounts, unknown>>;
  const number = (key: keyof SandboxCounts): number => (typeof stats[key] === 'number' ? stats[key] : Number.NaN);
  return {
    served: number('served'),
    conditional: number('conditional'),
    notModified: number('notModified'),
    bodyBytes: number('bodyBytes'),
    responseBytes: number('responseBytes'),
  };
}

/** `rate` requests per second over the pages in turn for `seconds`, paced every 10 ms. */
async function pacedLoad(
  url: string,
  pages: readonly string[],
  authorization: string,
  rate: number,
  seconds: number,
): Promise<{ readonly requests: number; readonly failed: number }> {
  const agent = new Agent({ keepAlive: true, maxSockets: 16 });
  const target = new URL(url);
  let sent = 0;
  let failed = 0;
  const pending = new Set<Promise<void>>();
  const one = (path: string): Promise<void> =>
    new Promise((resolve) => {
      const req = request(
        { host: target.hostname, port: target.port, path, agent, headers: { authorization } },
        (res) => {
          if (res.statusCode !== 200) failed += 1;
          res.resume();
          res.on('end', resolve);
          res.on('error', resolve);
        },
      );
      req.on('error', () => {
        failed += 1;
        resolve();
      });
      req.end();
    });
  const started = performance.now();
  const endAt = started + seconds * 1000;
  while (performance.now() < endAt) {
    const due = Math.floor(((performance.now() - started) / 1000) * rate);
    while (sent < due) {
      const path = pages[sent % pages.length] ?? '';
      sent += 1;
      const done = one(path).finally(() => pending.delete(done));
      pending.add(done);
    }
    await delay(10);
  }
  await Promise.all(pending);
  agent.destroy();
  return { requests: sent, failed };
}

/** What a save and a freshen of this page send to Redis (the key's length aside, which is the same). */
function writeBytes(body: Buffer): { readonly save: number; readonly freshen: number } {
  const etag = strongEtag(body);
  const entry = {
    status: 200,
    contentType: 'application/json',
    etag,
    body,
    brotli: brotliBody(body, etag),
    storedAt: Date.now(),
    freshUntil: Date.now() + 1_000,
    keepUntil: Date.now() + 61_000,
    generation: 'mx3k2v1a.0123abcd',
    upstreamEtag: `"${'0'.repeat(32)}"`,
    lastModified: new Date().toUTCString(),
  };
  // A freshen by SHA: the 40-character SHA, the prefix as read, 24 bytes of times, offset and expiry.
  return { save: encodeEntry(entry).length, freshen: 40 + storedPrefix(entry).length + 24 + 2 + 5 };
}

/** One round: a sandbox (validators on or off) and a proxy, warmed, then the load measured. */
export async function runRevalidationRound(
  settings: RevalidationSettings,
  mode: RevalidationMode,
): Promise<RevalidationFigures> {
  const pages = revalidationPages(settings.pages);
  const redis = new Redis(settings.redis.url, { maxRetriesPerRequest: 1 });
  await redis.flushall();
  const sandbox = await startSandbox({
    secret: settings.secret,
    rateLimit: 0,
    ...(settings.sandboxCpu !== undefined && { cpu: settings.sandboxCpu }),
  });
  await sandboxControl(sandbox.url, 'PUT', 'validators', { etag: mode.validators, lastModified: mode.validators });
  const proxy = await startProxy({
    name: `proxy (${mode.label})`,
    ...(mode.mainJs !== undefined && { mainJs: mode.mainJs }),
    upstreamUrl: sandbox.url,
    redis: settings.redis,
    secret: settings.secret,
    configFile: writeConfig(settings.workDir),
    logLevel: 'warn',
    ...(settings.proxyCpu !== undefined && { cpu: settings.proxyCpu }),
  });
  try {
    const authorization = `Bearer ${await mintDevToken({ company: 1, secret: settings.secret })}`;
    let saveBytes = 0;
    let freshenBytes = 0;
    for (const path of pages) {
      const warm = await get(`${proxy.url}${path}`, { authorization });
      if (warm.status !== 200) throw new Error(`warming ${path}: ${String(warm.status)}`);
      const bytes = writeBytes(warm.body);
      saveBytes += bytes.save / pages.length;
      freshenBytes += bytes.freshen / pages.length;
    }
    await sandboxControl(sandbox.url, 'POST', 'reset');
    const before = {
      cpu: processCpuUs(proxy.launched.pid) ?? Number.NaN,
      redis: await redisInputBytes(redis),
      revalidations: await revalidationCounts(proxy.adminUrl),
    };
    const load = await pacedLoad(proxy.url, pages, authorization, settings.rate, settings.seconds);
    const cpu = processCpuUs(proxy.launched.pid) ?? Number.NaN;
    const redisAfter = await redisInputBytes(redis);
    const upstream = await sandboxCounts(sandbox.url);
    const revalidations = await revalidationCounts(proxy.adminUrl);
    return {
      mode: mode.label,
      requests: load.requests,
      failed: load.failed,
      upstream: upstream.served,
      conditional: upstream.conditional,
      notModified: upstream.notModified,
      upstreamBodyBytes: upstream.bodyBytes,
      upstreamWireBytes: upstream.responseBytes,
      redisInputBytes: redisAfter - before.redis,
      proxyCpuMs: (cpu - before.cpu) / 1000,
      saveBytes,
      freshenBytes,
      revalidations: {
        not_modified: revalidations.not_modified - before.revalidations.not_modified,
        identical: revalidations.identical - before.revalidations.identical,
        modified: revalidations.modified - before.revalidations.modified,
      },
    };
  } finally {
    await stop(proxy.launched);
    await stop(sandbox.launched);
    redis.disconnect();
  }
}
