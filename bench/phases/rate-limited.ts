/**
 * The 429 path: a third proxy (on the server CPU, only for this phase) whose credential policy
 * allows one request an hour. One request spends a fresh credential's point; then rounds on the
 * warmed pages with that token, interleaved with the bare server: every answer must be a 429,
 * decided in well under a millisecond of proxy CPU, and from memory (the Redis commands during
 * the 429 rounds are compared with those during the bare server's rounds, when only the
 * proxies' background work runs).
 */
import { Redis } from 'ioredis';
import { mintDevToken } from '../../src/cli/dev-credentials.js';
import { fmt, fmtInt, say, spread, textTable, verdict } from '../lib/format.js';
import { get } from '../lib/http.js';
import type { LoadResult, LoadSpec } from '../lib/load/types.js';
import { stop } from '../lib/processes.js';
import {
  type MeasuredServer,
  measureRound,
  pairRatios,
  type Round,
  rotation,
  type Summary,
  summarize,
} from '../lib/rounds.js';
import type { ProxyProcess } from '../lib/services.js';
import { median } from '../lib/stats.js';
import type { BenchContext, Page } from './context.js';
import { describeRound } from './hits.js';

/** The phase's credential policy: one request an hour, spent before the rounds. */
export const ONE_POINT = { points: 1, duration: 3600 } as const;
/** A 429 is decided in well under a millisecond of proxy CPU. */
export const TARGET_US_PER_429 = 1000;

export interface RateLimitedFigures {
  readonly refused: Summary;
  readonly bare: Summary;
  readonly pairRatio: number;
  readonly answers429: number;
  readonly other: number;
  readonly otherStatuses: Readonly<Record<string, number>>;
  readonly redisCommands: number;
  readonly redisCommandsBackground: number;
  readonly pass: boolean;
}

export interface RateLimitedInput {
  readonly redisUrl: string;
  readonly secret: string;
  readonly pages: readonly Page[];
  readonly bare: MeasuredServer;
  /** Starts the phase's proxy with the one-point policy, on the server CPU. */
  readonly startLimitedProxy: () => Promise<ProxyProcess>;
}

export async function runRateLimited(ctx: BenchContext, input: RateLimitedInput): Promise<RateLimitedFigures> {
  const { seconds, connections, warmupSeconds } = ctx.settings;
  const rounds = Math.max(3, Math.ceil(ctx.settings.rounds / 2));
  const limited = await input.startLimitedProxy();
  try {
    const sub = 'bench-rate-limited';
    const authorization = `Bearer ${await mintDevToken({ company: '1', subject: sub, secret: input.secret })}`;
    const first = input.pages[0]?.path ?? '/';
    const spend = await get(`${limited.url}${first}`, { authorization });
    const refusal = await get(`${limited.url}${first}`, { authorization });
    say(
      `429 path: proxy 3 (CPU ${ctx.pinned ? '0' : 'any'}, started for this phase) with rateLimit.perCredential ${String(ONE_POINT.points)} per ${String(ONE_POINT.duration)} s; ` +
        `token sub ${sub} (company 1), its point spent by one request (${String(spend.status)})`,
    );
    say(
      `  the next answer: ${String(refusal.status)} ${refusal.headers.get('content-type') ?? '-'}, Retry-After ${refusal.headers.get('retry-after') ?? '-'}, RateLimit ${refusal.headers.get('ratelimit') ?? '-'}`,
    );
    say(
      `  ${String(rounds)} rounds × ${String(seconds)} s, ${String(connections)} connections, the ${String(input.pages.length)} warmed pages with that token, interleaved with the bare server`,
    );

    const requests = input.pages.map((p) => ({ path: p.path, headers: { authorization } }));
    const specs = {
      refused: (durationSec: number): LoadSpec => ({
        url: limited.url,
        connections,
        durationSec,
        expectStatus: 429,
        requests,
      }),
      bare: (durationSec: number): LoadSpec => ({ url: input.bare.url, connections, durationSec, requests }),
    };
    const servers: Record<'refused' | 'bare', MeasuredServer> = {
      refused: { url: limited.url, pids: () => [limited.launched.pid] },
      bare: input.bare,
    };
    const run = (spec: LoadSpec, label: string): Promise<LoadResult> => ctx.generator.run(spec, ctx.workDir, label);
    if (warmupSeconds > 0) await run(specs.refused(Math.min(warmupSeconds, 1)), 'warmup-429');

    const info = new Redis(input.redisUrl, { maxRetriesPerRequest: 1 });
    /** Commands Redis has processed, all clients (INFO is counted by the next INFO: one per reading). */
    const commands = async (): Promise<number> =>
      Number(/total_commands_processed:(\d+)/.exec(await info.info('stats'))?.[1] ?? Number.NaN);
    const measured: Record<'refused' | 'bare', Round[]> = { refused: [], bare: [] };
    const redis = { refused: 0, bare: 0 };
    try {
      for (let round = 1; round <= rounds; round++) {
        for (const which of rotation(['bare', 'refused'] as const, round)) {
          const before = await commands();
          const r = await measureRound(servers[which], specs[which](seconds), run, `429-${which}-${String(round)}`);
          redis[which] += (await commands()) - before - 1;
          measured[which].push(r);
          say(`  round ${String(round)} ${(which === 'refused' ? '429s' : 'bare').padEnd(5)} ${describeRound(r)}`);
        }
      }
    } finally {
      info.disconnect();
    }

    const refused = summarize(measured.refused);
    const bare = summarize(measured.bare);
    const answers429 = measured.refused.reduce((sum, r) => sum + r.load.completed, 0);
    const other = measured.refused.reduce((sum, r) => sum + r.load.unexpected + r.load.errors, 0);
    const otherStatuses: Record<string, number> = {};
    for (const r of measured.refused) {
      for (const [status, n] of Object.entries(r.load.statusCodes))
        if (status !== '429') otherStatuses[status] = (otherStatuses[status] ?? 0) + n;
    }
    const pairRatio = median(pairRatios(measured.refused, measured.bare));
    const pass = other === 0 && answers429 > 0 && refused.usPerRequest < TARGET_US_PER_429;
    say();
    const rows = [
      [
        'bare node:http',
        fmtInt(bare.rps),
        fmt(bare.p50Ms),
        fmt(bare.p99Ms),
        fmt(bare.usPerRequest, 1),
        `${fmt(bare.clientCpuPct, 0)}%`,
        spread(bare.rpsByRound, 0),
      ],
      [
        'proxy 429s',
        fmtInt(refused.rps),
        fmt(refused.p50Ms),
        fmt(refused.p99Ms),
        fmt(refused.usPerRequest, 1),
        `${fmt(refused.clientCpuPct, 0)}%`,
        spread(refused.rpsByRound, 0),
      ],
    ];
    for (const line of textTable(
      [`medians of ${String(rounds)} rounds`, 'req/s', 'p50 ms', 'p99 ms', 'µs CPU/req', 'client CPU', 'req/s range'],
      rows,
    ))
      say(line);
    say(
      `  throughput ratio 429s/bare (medians): ${fmt(refused.rps / bare.rps, 3)}; per-round pairs: median ${fmt(pairRatio, 3)}`,
    );
    say(
      `  every answer 429: ${verdict(other === 0 && answers429 > 0)} (${fmtInt(answers429)} × 429, ${String(other)} other answers or errors${other === 0 ? '' : `: ${JSON.stringify(otherStatuses)}`})`,
    );
    say(
      `  Redis commands, all clients: ${String(redis.refused)} during the 429 rounds (${fmt(redis.refused / Math.max(1, answers429), 4)} per 429), ` +
        `${String(redis.bare)} during the bare server's rounds (the proxies' background work alone)` +
        (redis.refused > 2 * redis.bare + 100 ? ' — the refusals ask Redis' : ': refusals decided in memory'),
    );
    say(
      `  ${fmt(refused.usPerRequest, 1)} µs of proxy CPU per 429 (target < ${String(TARGET_US_PER_429)} µs): ${verdict(refused.usPerRequest < TARGET_US_PER_429)}`,
    );
    return {
      refused,
      bare,
      pairRatio,
      answers429,
      other,
      otherStatuses,
      redisCommands: redis.refused,
      redisCommandsBackground: redis.bare,
      pass,
    };
  } finally {
    await stop(limited.launched);
  }
}
