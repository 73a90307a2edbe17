/**
 * Printing figures: numbers, verdicts, aligned text tables for the console, and the Markdown
 * the docs take verbatim (docs/benchmarks.md and docs/load-test.md: the figures there are pasted
 * from these lines, stamped with the command and the date, so they cannot drift from a run).
 */
import { cpus } from 'node:os';

export const fmtInt = (n: number): string => (Number.isFinite(n) ? Math.round(n).toLocaleString('en-US') : 'n/a');
export const fmt = (n: number, digits = 2): string => (Number.isFinite(n) ? n.toFixed(digits) : 'n/a');
export const verdict = (ok: boolean): string => (ok ? 'PASS' : 'MISS');
/** A ratio as a percentage with one decimal, e.g. `97.3%`; `n/a` when there is none. */
export const fmtPercent = (ratio: number | undefined): string =>
  ratio === undefined ? 'n/a' : `${(ratio * 100).toFixed(1)}%`;

/** `low–high` of the finite values. */
export function spread(values: readonly number[], digits: number): string {
  const finite = values.filter((v) => Number.isFinite(v));
  return finite.length === 0 ? 'n/a' : `${fmt(Math.min(...finite), digits)}–${fmt(Math.max(...finite), digits)}`;
}

export function say(line = ''): void {
  process.stdout.write(`${line}\n`);
}

export type Align = 'left' | 'right';

/** A console table: columns padded to their widest cell, indented by two spaces. */
export function textTable(
  header: readonly string[],
  rows: readonly (readonly string[])[],
  align: readonly Align[] = [],
): string[] {
  const widths = header.map((h, column) => Math.max(h.length, ...rows.map((row) => (row[column] ?? '').length)));
  const line = (cells: readonly string[]): string =>
    `  ${cells
      .map((cell, column) =>
        (align[column] ?? (column === 0 ? 'left' : 'right')) === 'left'
          ? cell.padEnd(widths[column] ?? 0)
          : cell.padStart(widths[column] ?? 0),
      )
      .join('  ')
      .trimEnd()}`;
  return [line(header), ...rows.map(line)];
}

/** A Markdown table; the first column left-aligned, the others right-aligned unless told. */
export function markdownTable(
  header: readonly string[],
  rows: readonly (readonly string[])[],
  align: readonly Align[] = [],
): string[] {
  const escapeCell = (cell: string): string => cell.replaceAll('|', '\\|');
  const rule = header.map((_, column) =>
    (align[column] ?? (column === 0 ? 'left' : 'right')) === 'left' ? '---' : '---:',
  );
  return [
    `| ${header.map(escapeCell).join(' | ')} |`,
    `|${rule.join('|')}|`,
    ...rows.map((row) => `| ${row.map(escapeCell).join(' | ')} |`),
  ];
}

/**
 * The line that says where figures come from: the command, the date (UTC) and the machine, e.g.
 * "`npm run bench`, 2026-11-23, 2 cores, wrk 4.1.0". `details` follow, comma-separated.
 */
export function runStamp(command: string, details: readonly string[] = [], when: Date = new Date()): string {
  const cores = cpus().length;
  return [
    `\`${command}\``,
    when.toISOString().slice(0, 10),
    `${cores} ${cores === 1 ? 'core' : 'cores'}`,
    ...details,
  ].join(', ');
}

/** Where `npm run bench` and `npm run loadtest` figures are pasted (a test holds each to the format). */
export const BENCHMARKS_DOC = 'docs/benchmarks.md';
export const LOAD_TEST_DOC = 'docs/load-test.md';

/** The block a person pastes into a page of the docs: fenced by two marker lines that say so. */
export function docsBlock(file: string, lines: readonly string[]): string[] {
  return [`── paste into ${file} ──`, ...lines, `── end of the lines for ${file} ──`];
}
