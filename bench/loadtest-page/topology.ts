/** The report's picture of the topology: boxes and arrows from the load generator to Redis and the sandbox. */
import { escapeHtml } from '../lib/svg-chart.js';
import type { LoadtestReport } from './types.js';

/** `:port` of a URL (the diagram's short form; the table below has the whole address). */
function portOf(url: string): string {
  try {
    return `:${new URL(url).port}`;
  } catch {
    return url;
  }
}

/** Boxes and arrows: generator → balancer → replicas → Redis and the sandbox. */
export function topologyDiagram(report: LoadtestReport): string {
  const { topology } = report;
  const width = 900;
  const boxHeight = 40;
  const rowHeight = 50;
  const replicaCount = topology.replicas.length;
  const height = Math.max(2 * rowHeight + 40, 20 + replicaCount * rowHeight);
  const font = 'font-family="system-ui, sans-serif"';
  const box = (x: number, y: number, w: number, label: string, sub: string, cls: string): string =>
    `<g class="node ${cls}"><rect x="${String(x)}" y="${y.toFixed(1)}" width="${String(w)}" height="${String(boxHeight)}" rx="6" fill="#f4f1de" stroke="#3d405b"/>` +
    `<text x="${String(x + w / 2)}" y="${(y + 17).toFixed(1)}" text-anchor="middle" ${font} font-size="13" font-weight="600">${escapeHtml(label)}</text>` +
    `<text x="${String(x + w / 2)}" y="${(y + 32).toFixed(1)}" text-anchor="middle" ${font} font-size="11" fill="#555">${escapeHtml(sub)}</text></g>`;
  const arrow = (x1: number, y1: number, x2: number, y2: number): string =>
    `<line x1="${String(x1)}" y1="${y1.toFixed(1)}" x2="${String(x2)}" y2="${y2.toFixed(1)}" stroke="#3d405b" stroke-width="1.5" marker-end="url(#arrow)"/>`;
  const centre = height / 2;
  const redisY = height * 0.3 - boxHeight / 2;
  const sandboxY = height * 0.7 - boxHeight / 2;
  const parts = [
    `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${String(width)} ${String(height)}" width="${String(width)}" height="${String(height)}" role="img" aria-label="topology">`,
    '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#3d405b"/></marker></defs>',
    box(
      10,
      centre - boxHeight / 2,
      150,
      'load generator',
      `${String(report.settings.connections)} connections`,
      'generator',
    ),
    arrow(160, centre, 210, centre),
    box(210, centre - boxHeight / 2, 150, 'balancer', `${portOf(topology.balancer)} round robin`, 'balancer'),
  ];
  const top = (height - replicaCount * rowHeight) / 2 + (rowHeight - boxHeight) / 2;
  topology.replicas.forEach((replica, i) => {
    const y = top + i * rowHeight;
    parts.push(
      arrow(360, centre, 420, y + boxHeight / 2),
      box(420, y, 160, `proxy ${String(i + 1)}`, portOf(replica), 'replica'),
      arrow(580, y + boxHeight / 2, 650, redisY + boxHeight / 2),
      arrow(580, y + boxHeight / 2, 650, sandboxY + boxHeight / 2),
    );
  });
  const nodes = topology.redis.nodes.length;
  parts.push(
    box(
      650,
      redisY,
      240,
      topology.redis.mode === 'cluster' ? 'Redis Cluster' : 'Redis',
      `${String(nodes)} ${nodes === 1 ? 'node' : 'nodes'}`,
      'redis',
    ),
    box(650, sandboxY, 240, 'sandbox (system of record)', portOf(topology.sandbox), 'sandbox'),
    '</svg>',
  );
  return `<figure class="chart" data-chart="topology">${parts.join('')}</figure>`;
}
