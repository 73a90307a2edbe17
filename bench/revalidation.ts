/**
 * What revalidation saves (docs/cache.md#revalidation): a refresh-heavy load (`phases/revalidation.ts`)
 * through a proxy process in front of the sandbox, with the sandbox's validators on and off, in
 * interleaved rounds, and the bytes the sandbox sent, the bytes Redis received and the proxy's CPU
 * for each.
 *
 *   npm run build && npx tsc -p tsconfig.bench.json && node dist-bench/bench/revalidation.js
 *
 * Settings: REVALIDATION_SECONDS (20) of load per round at REVALIDATION_RATE (150) requests per
 * second over REVALIDATION_PAGES (48) pages, REVALIDATION_ROUNDS (2) of each mode. With
 * REVALIDATION_BEFORE (another build's dist/main.js, e.g. a checkout from before revalidation), a
 * third mode runs that build's proxy against the sandbox with its validators on (which that proxy
 * ignores). Needs `redis-server` on PATH.
 */
import { randomBytes } from 'node:crypto';
import { envInt, envText } from './lib/env.js';
import { fmt, fmtInt, say, textTable } from './lib/format.js';
import { CLIENT_CPU, canPin, runProgram, SERVER_CPU, scratchDir, stop } from './lib/processes.js';
import { requireBuild, startRedisServer } from './lib/services.js';
import {
  MAX_PAGES,
  type RevalidationFigures,
  type RevalidationMode,
  runRevalidationRound,
} from './phases/revalidation.js';

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1
    ? (sorted[middle] ?? Number.NaN)
    : ((sorted[middle - 1] ?? 0) + (sorted[middle] ?? 0)) / 2;
}

const HEADER = [
  'upstream validators',
  'requests',
  'upstream requests',
  'conditional / 304',
  'upstream body B',
  'upstream wire B',
  'wire B per refresh',
  'Redis in B',
  'Redis B per refresh',
  'proxy CPU ms',
  'not_modified / identical / modified',
];

function row(mode: RevalidationMode, results: readonly RevalidationFigures[]): string[] {
  const mine = results.filter((r) => r.mode === mode.label);
  const m = (pick: (r: RevalidationFigures) => number): number => median(mine.map(pick));
  const refreshes = m((r) => r.upstream);
  const revalidations = [
    m((r) => r.revalidations.not_modified),
    m((r) => r.revalidations.identical),
    m((r) => r.revalidations.modified),
  ];
  return [
    mode.label,
    fmtInt(m((r) => r.requests)),
    fmtInt(refreshes),
    `${fmtInt(m((r) => r.conditional))} / ${fmtInt(m((r) => r.notModified))}`,
    fmtInt(m((r) => r.upstreamBodyBytes)),
    fmtInt(m((r) => r.upstreamWireBytes)),
    fmt(m((r) => r.upstreamWireBytes) / refreshes, 0),
    fmtInt(m((r) => r.redisInputBytes)),
    fmt(m((r) => r.redisInputBytes) / refreshes, 0),
    fmt(
      m((r) => r.proxyCpuMs),
      0,
    ),
    revalidations.map(fmtInt).join(' / '),
  ];
}

async function main(): Promise<number> {
  requireBuild();
  const seconds = envInt('REVALIDATION_SECONDS', 20, 2, 600);
  const rate = envInt('REVALIDATION_RATE', 150, 10, 20_000);
  const pages = envInt('REVALIDATION_PAGES', 48, 1, MAX_PAGES);
  const rounds = envInt('REVALIDATION_ROUNDS', 2, 1, 20);
  const before = envText('REVALIDATION_BEFORE');
  const modes: RevalidationMode[] = [
    { label: 'ETag + Last-Modified', validators: true },
    { label: 'none', validators: false },
    ...(before === undefined ? [] : [{ label: 'before (ignores them)', validators: true, mainJs: before }]),
  ];
  const pinned = canPin();
  const redis = await startRedisServer(pinned ? CLIENT_CPU : undefined);
  const settings = {
    secret: randomBytes(48).toString('base64url'),
    redis,
    workDir: scratchDir('slab-revalidation-'),
    seconds,
    rate,
    pages,
    ...(pinned && { proxyCpu: SERVER_CPU, sandboxCpu: CLIENT_CPU }),
  };
  say(
    `revalidation: ${String(pages)} pages of movements (${String(101 - pages)}–100 records), ttl 1 s, ` +
      `${String(rate)} requests/s for ${String(seconds)} s, ${String(rounds)} round(s) of each mode, ${redis.description}`,
  );
  const results: RevalidationFigures[] = [];
  for (let round = 0; round < rounds; round++) {
    for (const mode of round % 2 === 0 ? modes : [...modes].reverse()) {
      const figures = await runRevalidationRound(settings, mode);
      results.push(figures);
      say(`  round ${String(round + 1)} ${mode.label}: ${JSON.stringify(figures)}`);
    }
  }
  await stop(redis.launched);
  say();
  say('medians per mode:');
  for (const line of textTable(
    HEADER,
    modes.map((mode) => row(mode, results)),
  ))
    say(line);
  const first = results[0];
  if (first !== undefined)
    say(
      `a refresh's write to Redis, per page on average: a save ${fmtInt(first.saveBytes)} B (the entry, body in brotli), ` +
        `a freshen ${fmtInt(first.freshenBytes)} B (by SHA: the stored prefix and 24 bytes of times)`,
    );
  const failed = results.reduce((n, r) => n + r.failed, 0);
  if (failed > 0) say(`${String(failed)} requests did not get a 200`);
  return failed === 0 ? 0 : 1;
}

runProgram('revalidation bench', main);
