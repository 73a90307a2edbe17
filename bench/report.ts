/**
 * The end of `npm run bench`: the targets with their verdicts (bench/report/verdicts.ts,
 * bench/report/phase-verdicts.ts), the Markdown that docs/benchmarks.md takes verbatim
 * (bench/report/markdown.ts: a stamp line with the command, the date and the machine, the figures
 * per target, the targets table), so the figures there are always one run's, and the
 * `BENCH_RESULT {json}` line (bench/report/result-line.ts).
 */
import { BENCHMARKS_DOC, docsBlock, fmt, fmtInt, runStamp, say } from './lib/format.js';
import { TARGET_US_PER_429 } from './phases/rate-limited.js';
import { TARGET_STORED_RATIO } from './phases/stored-bytes.js';
import { type BenchRun, type TargetFigures, targetFigures, targetRows } from './report/figures.js';
import { benchMarkdown, disturbanceOf } from './report/markdown.js';
import { adviceVerdict, crowdVerdict, freshnessVerdicts, neighbourVerdict } from './report/phase-verdicts.js';
import { benchResultLine } from './report/result-line.js';
import { redisLoadVerdict, type Verdict, verdicts } from './report/verdicts.js';
import { BARE, HAPROXY, NGINX, PROXY, PROXY_BR } from './run/hit-rounds.js';

// The names the tests of the report and of docs/benchmarks.md read.
export type { TargetFigures } from './report/figures.js';
export { benchMarkdown, FIGURES_HEADER, VERDICTS_HEADER } from './report/markdown.js';
export { type Verdict, verdicts } from './report/verdicts.js';

/** Every verdict of the run, the hit rounds' first. */
function runVerdicts(run: BenchRun): Verdict[] {
  const figuresOf = (name: string): TargetFigures | undefined => targetFigures(run.hits, run.half, name);
  const proxy = figuresOf(PROXY);
  if (proxy === undefined) throw new Error('no proxy figures');
  const proxyResume = run.resume.byTarget.get(PROXY);
  return [
    ...verdicts({
      proxy,
      proxyBr: figuresOf(PROXY_BR),
      bodies: run.bodies,
      nginx: figuresOf(NGINX),
      haproxy: figuresOf(HAPROXY),
      bare: figuresOf(BARE),
      upstream: { requests: run.upstreamDuringHits, allowed: run.refreshesAllowed },
      coalesced: run.coalesced,
      stored: { ratio: run.stored.storedRatio, target: TARGET_STORED_RATIO, pass: run.stored.pass },
      rateLimited: {
        usPerRequest: run.rateLimited.refused.usPerRequest,
        target: TARGET_US_PER_429,
        other: run.rateLimited.other,
        pass: run.rateLimited.pass,
      },
      generator: run.setup.ctx.generator.label,
      allocation: run.allocation,
      resume: proxyResume && { idleSeconds: run.resume.idleSeconds, ...proxyResume },
    }),
    neighbourVerdict(run.neighbour),
    ...freshnessVerdicts(run.freshness),
    adviceVerdict(run.advice),
    crowdVerdict(run.crowd),
    redisLoadVerdict(run.redisLoad),
  ];
}

/** The generator, the anchors, connections and rounds: the stamp's details after the date and the machine. */
function stampDetails({ ctx, nginx, haproxy }: BenchRun['setup']): string[] {
  return [
    ctx.generator.label,
    'missing' in nginx ? 'no nginx' : `nginx ${nginx.version}`,
    'missing' in haproxy ? 'no HAProxy' : `HAProxy ${haproxy.version}`,
    `${String(ctx.settings.connections)} connections`,
    `${String(ctx.settings.rounds)} rounds × ${String(ctx.settings.seconds)} s`,
  ];
}

/** Prints the verdicts' summary, the lines for docs/benchmarks.md and the BENCH_RESULT line. */
export function reportBench(run: BenchRun): void {
  const rows = targetRows(run);
  const list = runVerdicts(run);
  const elapsed = (performance.now() - run.setup.started) / 1000;
  const missed = list.filter((v) => v.pass === false).map((v) => v.target);
  say();
  say(`done in ${fmt(elapsed, 0)} s; ${missed.length === 0 ? 'every target met' : `missed: ${missed.join('; ')}`}`);
  say();
  const disturbance = disturbanceOf(run.hits);
  const stamp = runStamp('npm run bench', stampDetails(run.setup));
  for (const line of docsBlock(BENCHMARKS_DOC, benchMarkdown(stamp, rows, list, disturbance))) say(line);
  say();
  say(benchResultLine(run, rows, list, disturbance, elapsed));
  say(
    `(${fmtInt(rows.length)} targets measured; figures from a shared machine are indicative: read CPU per request first)`,
  );
}
