/**
 * The hit breakdown's report: its rows and figures, the table it prints (docs/benchmarks.md and
 * test/docs/benchmark-figures.test.ts read that form) and the BENCH_RESULT figures it gives.
 */

/** step: a per-hit row, summed; detail: part of (or an alternative to) the step above it. */
export type RowKind = 'step' | 'detail' | 'total' | 'context';

export interface BreakdownRow {
  readonly section: string;
  readonly label: string;
  readonly kind: RowKind;
  /** Mean µs per call, GC included. */
  readonly us: number;
  /** Median of the batch means, µs. */
  readonly medianUs: number;
}

export interface StepTiming {
  readonly name: string;
  readonly us: number;
  readonly medianUs: number;
}

export interface BreakdownReport {
  readonly rows: readonly BreakdownRow[];
  /** Per hit, in order: opening the exchange (`EXCHANGE_ROW`), then each step of a hit's path. */
  readonly steps: readonly StepTiming[];
  readonly stepSumUs: number;
  /** The real data plane, end to end (the request and response objects made untimed). */
  readonly dataPlaneUs: number;
  /** What the baseline server itself does per request: writeHead with 2 headers + end. */
  readonly baselineWriteUs: number;
  /** dataPlaneUs − baselineWriteUs: what a hit costs beyond the bare server's own work. */
  readonly extraOverBaselineUs: number;
  readonly storeMissAmortisedUs: number | undefined;
  /** What the rows leave out, and why (steps a hit never reaches, details of such steps). */
  readonly notes: readonly string[];
}

/** The per-hit work of the data plane before its first step: `openExchange`. */
export const EXCHANGE_ROW = 'exchange';
export const FLOW_SECTION = 'request flow (REQUEST_FLOW, src/planes/data/steps.ts)';

/** The BENCH_RESULT figures: µs per hit of each step (by name, in snake case) and of the whole data plane. */
export function breakdownResult(report: BreakdownReport): Record<string, number> {
  return Object.fromEntries([
    ...report.steps.map((step) => [step.name.toLowerCase().replaceAll(/[^a-z0-9]+/g, '_'), step.us]),
    ['data_plane', report.dataPlaneUs],
  ]);
}

export function formatBreakdown(report: BreakdownReport): string {
  const lines: string[] = [];
  // As wide as the longest label (a step's name is the flow's to choose), and never narrower than it was.
  const width = Math.max(66, ...report.rows.map((row) => row.label.length + (row.kind === 'detail' ? 4 : 2)));
  const total = report.dataPlaneUs > 0 ? report.dataPlaneUs : report.stepSumUs;
  lines.push(`  ${'step'.padEnd(width)} ${'µs/hit'.padStart(8)} ${'median'.padStart(8)} ${'share'.padStart(6)}`);
  let section = '';
  for (const row of report.rows) {
    if (row.section !== section) {
      section = row.section;
      lines.push(`  [${section}]`);
    }
    const label = row.kind === 'detail' ? `    ${row.label}` : `  ${row.label}`;
    const share = row.kind === 'step' ? `${((100 * row.us) / total).toFixed(0)}%` : '';
    lines.push(
      `  ${label.padEnd(width)} ${row.us.toFixed(2).padStart(8)} ${row.medianUs === 0 ? ''.padStart(8) : row.medianUs.toFixed(2).padStart(8)} ${share.padStart(6)}`,
    );
  }
  lines.push(`  by step (µs): ${report.steps.map((step) => `${step.name} ${step.us.toFixed(2)}`).join(' · ')}`);
  if (report.storeMissAmortisedUs !== undefined) {
    lines.push(
      `  L1 misses amortised over hits at the measured rate: ${report.storeMissAmortisedUs.toFixed(3)} µs/hit`,
    );
  }
  for (const note of report.notes) lines.push(`  note: ${note}`);
  return lines.join('\n');
}
