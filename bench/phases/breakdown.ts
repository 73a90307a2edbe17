/**
 * Where a hit's microseconds go: bench/hit-breakdown.ts in this process, on the server CPU, with
 * the servers stopped (the data plane's request flow, step by step), then set against the CPU per
 * hit measured under load.
 */
import { type BreakdownReport, formatBreakdown, runHitBreakdown } from '../hit-breakdown.js';
import { fmt, say } from '../lib/format.js';
import { CLIENT_CPU, pin, SERVER_CPU } from '../lib/processes.js';
import type { Page } from './context.js';

/** How many of the costliest steps the summary line names. */
const LARGEST_STEPS = 5;

export interface BreakdownInput {
  readonly redisUrl: string;
  readonly secret: string;
  readonly pages: readonly Page[];
  /** The proxy's hits per second under load, CPU µs per hit, and the bare server's. */
  readonly hitsPerSecond: number;
  readonly proxyUsPerRequest: number;
  readonly bareUsPerRequest: number;
  readonly pinned: boolean;
}

export async function runBreakdown(input: BreakdownInput): Promise<BreakdownReport> {
  if (input.pinned) pin(process.pid, SERVER_CPU);
  try {
    say(
      `where a hit's microseconds go (in-process, real modules of src/, CPU ${input.pinned ? String(SERVER_CPU) : 'any'}; bench/hit-breakdown.ts)`,
    );
    const report = await runHitBreakdown({
      redisUrl: input.redisUrl,
      secret: input.secret,
      pages: input.pages.map((p) => ({ path: p.path, body: p.body, company: p.company })),
      hitsPerSecond: input.hitsPerSecond,
    });
    say(formatBreakdown(report));
    const gap = input.proxyUsPerRequest - input.bareUsPerRequest;
    say(
      `  measured under load: proxy ${fmt(input.proxyUsPerRequest, 1)} µs CPU/req − bare ${fmt(input.bareUsPerRequest, 1)} = ${fmt(gap, 1)} µs per hit beyond the bare server; ` +
        `in-process estimate ${fmt(report.extraOverBaselineUs, 1)} µs`,
    );
    const ranked = [...report.steps].sort((a, b) => b.us - a.us).slice(0, LARGEST_STEPS);
    say(`  largest steps: ${ranked.map((step) => `${step.name} ${fmt(step.us, 1)} µs`).join(', ')}`);
    return report;
  } finally {
    if (input.pinned) pin(process.pid, CLIENT_CPU);
  }
}
