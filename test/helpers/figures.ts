/**
 * Figures a system suite measured, for the closing note and the docs: appended as JSON lines to
 * `$FIGURES_FILE` when it is set (nothing otherwise). The suites assert their targets themselves;
 * this only keeps the numbers they saw. `SCALE_SECONDS` lengthens the measured runs (default short,
 * for CI).
 */
import { appendFileSync } from 'node:fs';

export function recordFigure(suite: string, name: string, value: unknown): void {
  const file = process.env.FIGURES_FILE;
  if (file === undefined || file === '') return;
  appendFileSync(file, `${JSON.stringify({ suite, name, value, at: new Date().toISOString() })}\n`);
}

/** Seconds a measured run lasts: `SCALE_SECONDS`, else `fallback`. */
export function scaleSeconds(fallback: number): number {
  const text = process.env.SCALE_SECONDS;
  const value = text === undefined ? Number.NaN : Number(text);
  return Number.isInteger(value) && value > 0 ? value : fallback;
}
