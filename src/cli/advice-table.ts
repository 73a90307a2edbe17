/**
 * The freshness advice as `npm run advise` prints it: the operator API's answer
 * (`GET /admin/cache/freshness`, docs/cache.md#freshness-advice) read against its schema, and laid
 * out as a table a person takes in at a glance: one line per resource, durations in s/m/h/d,
 * shares in percent, `—` where nothing is known yet, and the notes under it.
 */
import { z } from 'zod';

/** One resource's advice on the wire; members the CLI does not show are let through unread. */
const resourceAdvice = z.object({
  resource: z.string(),
  ttl_seconds: z.number(),
  refreshes_per_minute: z.number(),
  fills_per_minute: z.number(),
  unchanged_share: z.number().nullable(),
  upstream_bytes_per_minute: z.number(),
  change_interval_seconds: z.number().nullable(),
  stale_share_estimate: z.number().nullable(),
  suggested_ttl_seconds: z.number().nullable(),
  note: z.string().nullable(),
});

export const freshnessAnswer = z.object({
  resources: z.array(resourceAdvice),
  window_seconds: z.number(),
  target_seconds: z.number(),
});
export type FreshnessAnswer = z.infer<typeof freshnessAnswer>;

const COLUMNS = [
  'resource',
  'ttl',
  'change every',
  'unchanged %',
  'refreshes/min',
  'KB/min',
  'stale % now',
  'suggested ttl',
] as const;
const NOTHING = '—';

/** The table, its heading line first and the notes last, each line ending in a newline. */
export function adviceTable(answer: FreshnessAnswer, source: string): string {
  const heading =
    `Freshness advice of ${source}: this replica's fills over the last ${duration(answer.window_seconds)}, ` +
    `target staleness ${duration(answer.target_seconds)}\n`;
  if (answer.resources.length === 0) return `${heading}No fills yet: nothing to advise.\n`;
  const rows = answer.resources.map((advice) => [
    advice.resource,
    duration(advice.ttl_seconds),
    optional(advice.change_interval_seconds, duration),
    optional(advice.unchanged_share, percent),
    advice.refreshes_per_minute.toFixed(1),
    (advice.upstream_bytes_per_minute / 1000).toFixed(1),
    optional(advice.stale_share_estimate, percent),
    optional(advice.suggested_ttl_seconds, duration),
  ]);
  const widths = COLUMNS.map((title, i) => Math.max(title.length, ...rows.map((row) => (row[i] ?? '').length)));
  const line = (cells: readonly string[]): string =>
    `${cells
      .map((cell, i) => (i === 0 ? cell.padEnd(widths[i] ?? 0) : cell.padStart(widths[i] ?? 0)))
      .join('  ')
      .trimEnd()}\n`;
  const notes = answer.resources.flatMap((advice) =>
    advice.note === null ? [] : [`${advice.resource}: ${advice.note}\n`],
  );
  return [heading, '\n', line(COLUMNS), ...rows.map(line), ...(notes.length > 0 ? ['\n', ...notes] : [])].join('');
}

function optional(value: number | null, format: (value: number) => string): string {
  return value === null ? NOTHING : format(value);
}

const UNITS = [
  ['d', 86_400],
  ['h', 3_600],
  ['m', 60],
  ['s', 1],
] as const;

/** A duration in its two largest units: `45s`, `1m 30s`, `2h 5m`, `3d 4h`; tenths under 10 s. */
export function duration(seconds: number): string {
  if (seconds < 9.95 && !Number.isInteger(seconds)) return `${seconds.toFixed(1)}s`;
  let rest = Math.round(seconds);
  const parts: string[] = [];
  for (const [unit, size] of UNITS) {
    const count = Math.floor(rest / size);
    rest -= count * size;
    if (count > 0 || parts.length > 0) parts.push(`${String(count)}${unit}`);
  }
  const [largest = '0s', next] = parts;
  return next === undefined || next.startsWith('0') ? largest : `${largest} ${next}`;
}

/** A share as a percentage: whole numbers from 10 %, tenths below, `0` for none, `<0.1` for a trace. */
export function percent(share: number): string {
  const value = share * 100;
  if (value === 0) return '0';
  if (value < 0.05) return '<0.1';
  return value >= 10 ? value.toFixed(0) : value.toFixed(1);
}
