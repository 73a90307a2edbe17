/**
 * What tracing costs on the hit path (docs/operations.md#tracing): the real data plane (`createDataPlane`,
 * the real authenticator, limits, read service and answer writer; the request log to /dev/null as
 * shipped) serving cache hits from the in-process store, in this process, with fake sockets, in
 * interleaved rounds of:
 *
 *   off                 no tracing configured (what ships unless OTEL_EXPORTER_OTLP_ENDPOINT is set)
 *   off, again          the same data plane measured a second time: the method's own noise, the
 *                       smallest difference these figures can show
 *   before tracing      with TRACING_COST_BASELINE only: another build's data plane (below)
 *   off, client traceparent   tracing off, the client sending `traceparent` and `tracestate`
 *   on, not sampled     tracing configured, the sampler saying no (OTEL_TRACES_SAMPLER=always_off)
 *   on, sampled         every request recorded, batched to an exporter that discards them (the
 *                       work of the OTLP export's HTTP requests is not counted)
 *   on, sampled, client traceparent   the same, the client sending `traceparent` and `tracestate`
 *
 * A hit whose token was verified lately is answered without leaving the call, so each request is
 * one synchronous call of the data plane; batches of them are timed with `process.hrtime.bigint()`
 * (GC included), the event loop turning between batches (the batch processor exports there).
 * Reported: the median over rounds of each variant's µs per hit, and the difference from `off`.
 * The parts: the builds' modules (tracing-cost/builds.ts), their data planes and stored pages
 * (tracing-cost/hit-planes.ts), the variants (tracing-cost/variants.ts), the timing
 * (tracing-cost/measure.ts) and the table (tracing-cost/report.ts).
 *
 * With TRACING_COST_BASELINE set to another build's `dist/` (the commit before tracing, built with
 * `npm run build`), that build's data plane runs beside this one's in the same rounds, each with
 * its own modules and components: the before/after of tracing off.
 *
 * Run alone: `npm run build && npx tsc -p tsconfig.bench.json && node dist-bench/bench/phases/tracing-cost.js`
 * (TRACING_COST_ROUNDS, default 7; TRACING_COST_MS per variant and round, default 400). It needs
 * nothing but Node: no Redis, no upstream.
 */
import { fileURLToPath, pathToFileURL } from 'node:url';
import { mintDevToken } from '../../src/cli/dev-credentials.js';
import { loadBuild, THIS_BUILD } from './tracing-cost/builds.js';
import { hitCountingLog, hitPlanes } from './tracing-cost/hit-planes.js';
import { measureInRounds } from './tracing-cost/measure.js';
import { formatTracingCost, type TracingCostReport, tracingCostReport } from './tracing-cost/report.js';
import { tracingVariants } from './tracing-cost/variants.js';

export { sink } from './tracing-cost/measure.js';
export { formatTracingCost, type TracingCostReport, type TracingCostRow } from './tracing-cost/report.js';

export interface TracingCostOptions {
  readonly rounds?: number;
  /** Another build's `dist/` (a file URL ending in `/`): its data plane is measured beside this one's. */
  readonly baselineRoot?: string;
  /** Measured time per variant and round, ms. */
  readonly msPerVariant?: number;
}

export async function runTracingCost(options: TracingCostOptions = {}): Promise<TracingCostReport> {
  const build = await loadBuild(THIS_BUILD);
  const counting = hitCountingLog(build);
  const bearer = await mintDevToken({ company: 1 });
  const current = await hitPlanes(build, bearer, counting.log);
  const baseline =
    options.baselineRoot === undefined
      ? undefined
      : await hitPlanes(await loadBuild(options.baselineRoot), bearer, counting.log);
  const variants = await tracingVariants(current, baseline, bearer);
  await measureInRounds(variants, current.paths, counting, {
    rounds: options.rounds ?? 7,
    msPerVariant: options.msPerVariant ?? 400,
  });
  for (const variant of variants) await variant.shutdown();
  current.close();
  baseline?.close();
  return tracingCostReport(variants);
}

async function main(): Promise<void> {
  const rounds = Number(process.env.TRACING_COST_ROUNDS ?? '7');
  const msPerVariant = Number(process.env.TRACING_COST_MS ?? '400');
  const baseline = process.env.TRACING_COST_BASELINE;
  const report = await runTracingCost({
    rounds,
    msPerVariant,
    ...(baseline !== undefined &&
      baseline !== '' && { baselineRoot: pathToFileURL(`${baseline.replace(/\/+$/, '')}/`).href }),
  });
  process.stdout.write(
    `what tracing costs a cache hit (in-process data plane, in-process store, ${rounds} rounds × ${msPerVariant} ms per variant)\n${formatTracingCost(report)}\n`,
  );
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  main().catch((error: unknown) => {
    process.stderr.write(`tracing-cost: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  });
}
