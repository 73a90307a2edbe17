/**
 * Inline SVG charts for self-contained HTML reports: no script, no fonts or styles fetched, so a
 * report opened from disk, mailed or attached to an issue draws the same everywhere. A line chart
 * of series over time (seconds), and horizontal bars of counts.
 */

export function escapeHtml(text: string): string {
  return text
    .replaceAll('&', '&amp;')
    .replaceAll('<', '&lt;')
    .replaceAll('>', '&gt;')
    .replaceAll('"', '&quot;')
    .replaceAll("'", '&#39;');
}

export interface Series {
  readonly name: string;
  readonly color: string;
  /** [x, y] points; points whose y is not finite are left out (a gap in the data). */
  readonly points: readonly (readonly [number, number])[];
}

export interface LineChartOptions {
  /** Identifies the chart in the page (`data-chart`). */
  readonly id: string;
  readonly title: string;
  readonly yLabel: string;
  readonly xLabel?: string;
  readonly series: readonly Series[];
  /** The y axis's top at least this (e.g. 100 for a percentage). */
  readonly yMax?: number;
  readonly width?: number;
  readonly height?: number;
}

/** 1, 2 or 5 × a power of ten, at least `value / steps` per step: tick spacing. */
function niceStep(value: number, steps: number): number {
  if (!(value > 0)) return 1;
  const raw = value / steps;
  const power = 10 ** Math.floor(Math.log10(raw));
  const mantissa = raw / power;
  return (mantissa <= 1 ? 1 : mantissa <= 2 ? 2 : mantissa <= 5 ? 5 : 10) * power;
}

function tickLabel(value: number): string {
  if (value === 0) return '0';
  if (Math.abs(value) >= 1000) return value.toLocaleString('en-US', { maximumFractionDigits: 0 });
  return String(Number(value.toPrecision(3)));
}

const FONT = 'font-family="system-ui, sans-serif" font-size="12"';

export function lineChart(options: LineChartOptions): string {
  const width = options.width ?? 900;
  const height = options.height ?? 240;
  const margin = { top: 28, right: 16, bottom: 40, left: 64 };
  const plotWidth = width - margin.left - margin.right;
  const plotHeight = height - margin.top - margin.bottom;
  const finite = options.series.flatMap((s) => s.points.filter(([x, y]) => Number.isFinite(x) && Number.isFinite(y)));
  const xMax = Math.max(1, ...finite.map(([x]) => x));
  const yTop = Math.max(options.yMax ?? 0, ...finite.map(([, y]) => y));
  const yStep = niceStep(yTop, 4);
  const yMax = Math.max(yStep, Math.ceil(yTop / yStep) * yStep);
  const xStep = niceStep(xMax, 10);
  const sx = (x: number): number => margin.left + (x / xMax) * plotWidth;
  const sy = (y: number): number => margin.top + plotHeight - (y / yMax) * plotHeight;
  const parts: string[] = [];
  parts.push(
    `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${String(width)} ${String(height)}" width="${String(width)}" height="${String(height)}" role="img" aria-label="${escapeHtml(options.title)}">`,
  );
  parts.push(`<text x="${String(margin.left)}" y="18" ${FONT} font-weight="600">${escapeHtml(options.title)}</text>`);
  for (let y = 0; y <= yMax + yStep / 2; y += yStep) {
    parts.push(
      `<line x1="${String(margin.left)}" x2="${String(width - margin.right)}" y1="${sy(y).toFixed(1)}" y2="${sy(y).toFixed(1)}" stroke="#e3e3e3"/>`,
    );
    parts.push(
      `<text x="${String(margin.left - 6)}" y="${(sy(y) + 4).toFixed(1)}" text-anchor="end" ${FONT} fill="#555">${tickLabel(y)}</text>`,
    );
  }
  for (let x = 0; x <= xMax + xStep / 2; x += xStep) {
    parts.push(
      `<line x1="${sx(x).toFixed(1)}" x2="${sx(x).toFixed(1)}" y1="${String(margin.top + plotHeight)}" y2="${String(margin.top + plotHeight + 4)}" stroke="#999"/>`,
    );
    parts.push(
      `<text x="${sx(x).toFixed(1)}" y="${String(margin.top + plotHeight + 17)}" text-anchor="middle" ${FONT} fill="#555">${tickLabel(x)}</text>`,
    );
  }
  parts.push(
    `<line x1="${String(margin.left)}" x2="${String(width - margin.right)}" y1="${String(margin.top + plotHeight)}" y2="${String(margin.top + plotHeight)}" stroke="#999"/>`,
  );
  parts.push(
    `<text x="${String(margin.left + plotWidth / 2)}" y="${String(height - 6)}" text-anchor="middle" ${FONT} fill="#555">${escapeHtml(options.xLabel ?? 'seconds')}</text>`,
    `<text transform="translate(14 ${String(margin.top + plotHeight / 2)}) rotate(-90)" text-anchor="middle" ${FONT} fill="#555">${escapeHtml(options.yLabel)}</text>`,
  );
  let legendX = width - margin.right;
  for (const series of [...options.series].reverse()) {
    const label = escapeHtml(series.name);
    legendX -= 14 + series.name.length * 7 + 12;
    parts.push(`<rect x="${String(legendX)}" y="9" width="10" height="10" fill="${escapeHtml(series.color)}"/>`);
    parts.push(`<text x="${String(legendX + 14)}" y="18" ${FONT}>${label}</text>`);
  }
  for (const series of options.series) {
    const points = series.points.filter(([x, y]) => Number.isFinite(x) && Number.isFinite(y));
    const coordinates = points.map(([x, y]) => `${sx(x).toFixed(1)},${sy(y).toFixed(1)}`).join(' ');
    parts.push(
      `<polyline class="series" data-series="${escapeHtml(series.name)}" data-points="${String(points.length)}" points="${coordinates}" fill="none" stroke="${escapeHtml(series.color)}" stroke-width="2" stroke-linejoin="round">` +
        `<title>${escapeHtml(series.name)}</title></polyline>`,
    );
    // A lone point draws no line: mark it.
    if (points.length === 1 && points[0] !== undefined) {
      parts.push(
        `<circle cx="${sx(points[0][0]).toFixed(1)}" cy="${sy(points[0][1]).toFixed(1)}" r="3" fill="${escapeHtml(series.color)}"/>`,
      );
    }
  }
  parts.push('</svg>');
  return `<figure class="chart" data-chart="${escapeHtml(options.id)}">${parts.join('')}</figure>`;
}

export interface Bar {
  readonly label: string;
  readonly value: number;
  readonly color: string;
}

/** Horizontal bars with their counts, longest first as given. */
export function barChart(id: string, title: string, bars: readonly Bar[], width = 900): string {
  const rowHeight = 26;
  const labelWidth = 120;
  const height = 32 + bars.length * rowHeight;
  const max = Math.max(1, ...bars.map((b) => b.value));
  const parts = [
    `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${String(width)} ${String(height)}" width="${String(width)}" height="${String(height)}" role="img" aria-label="${escapeHtml(title)}">`,
    `<text x="0" y="18" ${FONT} font-weight="600">${escapeHtml(title)}</text>`,
  ];
  bars.forEach((bar, i) => {
    const y = 30 + i * rowHeight;
    const length = Math.max(bar.value > 0 ? 2 : 0, ((width - labelWidth - 110) * bar.value) / max);
    parts.push(
      `<text x="0" y="${String(y + 15)}" ${FONT}>${escapeHtml(bar.label)}</text>`,
      `<rect class="bar" data-label="${escapeHtml(bar.label)}" x="${String(labelWidth)}" y="${String(y + 3)}" width="${length.toFixed(1)}" height="16" fill="${escapeHtml(bar.color)}"/>`,
      `<text x="${(labelWidth + length + 6).toFixed(1)}" y="${String(y + 15)}" ${FONT}>${bar.value.toLocaleString('en-US')}</text>`,
    );
  });
  parts.push('</svg>');
  return `<figure class="chart" data-chart="${escapeHtml(id)}">${parts.join('')}</figure>`;
}
