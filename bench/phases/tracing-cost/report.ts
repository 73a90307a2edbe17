/** What tracing costs, per variant: the median over rounds of its µs per hit, the difference from `off`, spans per request. */
import { fmt, spread, textTable } from '../../lib/format.js';
import { median } from '../../lib/stats.js';
import type { Variant } from './variants.js';

export interface TracingCostRow {
  readonly variant: string;
  /** Median over rounds of the mean µs per hit. */
  readonly usPerHit: number;
  /** Each round's mean µs per hit. */
  readonly rounds: readonly number[];
  /** usPerHit − off's. */
  readonly overOffUs: number;
  /** Spans exported per request (tracing on): 1 when sampled and none was dropped, 0 when not sampled. */
  readonly spansPerRequest: number | undefined;
}

export interface TracingCostReport {
  readonly rows: readonly TracingCostRow[];
  /** |off, again − off|: differences below this are not measurable by this method. */
  readonly noiseUs: number;
}

/** The rows of measured variants, `off` first and `off, again` second. */
export function tracingCostReport(variants: readonly Variant[]): TracingCostReport {
  const off = median(variants[0]?.means ?? []);
  const rows = variants.map((variant) => {
    const usPerHit = median(variant.means);
    return {
      variant: variant.name,
      usPerHit,
      rounds: variant.means,
      overOffUs: usPerHit - off,
      spansPerRequest: variant.exporter === undefined ? undefined : variant.exporter.exported / variant.requests,
    };
  });
  return { rows, noiseUs: Math.abs(rows[1]?.overOffUs ?? Number.NaN) };
}

export function formatTracingCost(report: TracingCostReport): string {
  const table = textTable(
    ['variant', 'µs/hit (median)', 'rounds (low–high)', 'vs off', 'spans/request'],
    report.rows.map((row) => [
      row.variant,
      fmt(row.usPerHit, 2),
      spread(row.rounds, 2),
      `${row.overOffUs >= 0 ? '+' : ''}${fmt(row.overOffUs, 2)}`,
      row.spansPerRequest === undefined ? '' : fmt(row.spansPerRequest, 3),
    ]),
  );
  return [...table, `  the method's resolution (|off, again − off|): ${fmt(report.noiseUs, 2)} µs`].join('\n');
}
