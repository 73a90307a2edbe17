/**
 * What a replica's hits cost Redis while nothing changes (docs/scaling-out.md#what-redis-carries):
 * Redis's own count of commands (`total_commands_processed`) around an idle spell and around two
 * closed-loop loads through a proxy of its own whose pages are fresh for an hour: over one page of
 * each company, and over the 50 pages, with the same credentials. What the inbound limits' leases
 * cost follows the credentials and the rate, not the pages, so the difference between the two
 * loads, over the pages they differ by, is what each hot page costs: with the change channel
 * vouching for the L1, and then without its verdict (the sequence made unreadable: each copy
 * confirmed every L1 lifetime, as before the channel). The idle rate is the whole rig's (every
 * proxy of the run shares the Redis).
 */
import { Redis } from 'ioredis';
import { changeSequenceKey } from '../../src/cache/entry/cache-key.js';
import { fmt, say } from '../lib/format.js';
import type { LoadSpec } from '../lib/load/types.js';
import { type BenchContext, type Page, requestsFor } from './context.js';

export interface RedisLoadInput {
  readonly redisUrl: string;
  readonly proxyUrl: string;
  /** The measured proxy's admin URL: its channel's verdict. */
  readonly adminUrl: string;
  readonly keyPrefix: string;
  readonly pages: readonly Page[];
  readonly bearer: (company: string) => string;
}

export interface RedisLoadRun {
  readonly label: 'told' | 'asking';
  /** Commands a second during the load over one page of each company, and over every page. */
  readonly fewPerSecond: number;
  readonly allPerSecond: number;
  /** Commands a second each hot page adds: the difference of the two loads over their pages'. */
  readonly perHotPagePerSecond: number;
  readonly hitsPerSecond: number;
}

export interface RedisLoadFigures {
  readonly seconds: number;
  /** The pages of each load: one of each company's, and every page. */
  readonly fewPages: number;
  readonly pages: number;
  /** Commands a second over the idle spell, the whole rig's. */
  readonly idlePerSecond: number;
  readonly told: RedisLoadRun;
  readonly asking: RedisLoadRun;
}

/** The hot pages' target, commands a second each with nothing changing (docs/benchmarks.md#targets). */
export const TARGET_COMMANDS_PER_HOT_PAGE = 0.1;

const SECONDS = 20;

async function commandsProcessed(redis: Redis): Promise<number> {
  const info = await redis.info('stats');
  return Number(/total_commands_processed:(\d+)/.exec(info)?.[1] ?? Number.NaN);
}

async function toldGauge(adminUrl: string): Promise<number> {
  const text = await (await fetch(`${adminUrl}/metrics`)).text();
  return Number(/^slab_proxy_l1_channel_told (\d)/m.exec(text)?.[1] ?? Number.NaN);
}

/** Polls the proxy's verdict until it is `value`, for at most 10 s. */
async function untilTold(adminUrl: string, value: number): Promise<void> {
  const deadline = Date.now() + 10_000;
  while ((await toldGauge(adminUrl)) !== value) {
    if (Date.now() > deadline) throw new Error(`redis load: the proxy's channel never said ${String(value)}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** Redis's commands a second while `during` runs. */
async function commandsPerSecond(redis: Redis, during: () => Promise<unknown>): Promise<number> {
  const from = await commandsProcessed(redis);
  const start = performance.now();
  await during();
  return ((await commandsProcessed(redis)) - from) / ((performance.now() - start) / 1000);
}

/** One page of each company: the same credentials and companies as every page, a few pages. */
function onePerCompany(pages: readonly Page[]): Page[] {
  const seen = new Set<string>();
  return pages.filter((page) => !seen.has(page.company) && seen.add(page.company) !== undefined);
}

async function measure(
  ctx: BenchContext,
  input: RedisLoadInput,
  redis: Redis,
  label: RedisLoadRun['label'],
): Promise<RedisLoadRun> {
  const few = onePerCompany(input.pages);
  let hitsPerSecond = 0;
  const load = (pages: readonly Page[], name: string) => async (): Promise<void> => {
    const spec: LoadSpec = {
      url: input.proxyUrl,
      connections: ctx.settings.connections,
      durationSec: SECONDS,
      requests: requestsFor(pages, input.bearer),
    };
    hitsPerSecond = (await ctx.generator.run(spec, ctx.workDir, `redis-load-${label}-${name}`)).rps;
  };
  const fewPerSecond = await commandsPerSecond(redis, load(few, 'few'));
  const allPerSecond = await commandsPerSecond(redis, load(input.pages, 'all'));
  const perHotPagePerSecond = Math.max(0, allPerSecond - fewPerSecond) / (input.pages.length - few.length);
  say(
    `  ${label.padEnd(6)} ${fmt(fewPerSecond, 1)} commands/s over ${String(few.length)} pages, ${fmt(allPerSecond, 1)}/s over ${String(input.pages.length)} (${fmt(hitsPerSecond, 0)} hits/s): ${fmt(perHotPagePerSecond, 2)} a second per hot page`,
  );
  return { label, fewPerSecond, allPerSecond, perHotPagePerSecond, hitsPerSecond };
}

export async function runRedisLoad(ctx: BenchContext, input: RedisLoadInput): Promise<RedisLoadFigures> {
  say(
    `redis load: Redis's commands around ${String(SECONDS)} s idle and ${String(SECONDS)} s loads of hits over one page of each company and over every page (fresh for an hour), with the change channel and without its verdict`,
  );
  const redis = new Redis(input.redisUrl, { maxRetriesPerRequest: 1 });
  const sequence = changeSequenceKey(input.keyPrefix);
  try {
    await untilTold(input.adminUrl, 1);
    const idlePerSecond = await commandsPerSecond(
      redis,
      () => new Promise((resolve) => setTimeout(resolve, SECONDS * 1000)),
    );
    say(`  idle   ${fmt(idlePerSecond, 1)} commands/s (every proxy of the run)`);
    const told = await measure(ctx, input, redis, 'told');
    // A sequence the heartbeat cannot read: no verdict, each copy confirmed every L1 lifetime.
    await redis.del(sequence);
    await redis.rpush(sequence, 'unreadable');
    await untilTold(input.adminUrl, 0);
    const asking = await measure(ctx, input, redis, 'asking');
    const fewPages = onePerCompany(input.pages).length;
    return { seconds: SECONDS, fewPages, pages: input.pages.length, idlePerSecond, told, asking };
  } finally {
    await redis.del(sequence);
    redis.disconnect();
  }
}
