/**
 * The dashboard and the alert rules against a running proxy (real `redis-server`, the sandbox over
 * HTTP): every metric name they select is one `/metrics` exposes, every `slab_proxy_*` family
 * exposed is on the dashboard, and the proxy's own families pass `promtool check metrics`.
 */
import { spawnSync } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API_PREFIX } from '../../src/catalog/resources.js';
import type { Sandbox } from '../../src/sandbox/server.js';
import { type ProxyHandle, startProxy, startSandbox } from '../helpers/env.js';
import { getWithToken, send } from '../helpers/http.js';
import { type Exposition, parseExposition } from '../helpers/prometheus.js';
import { metricNames, observabilityExpressions, readDashboard } from '../helpers/promql.js';
import { type RedisServer, startRedis } from '../helpers/redis.js';
import { settledOperatorState } from '../helpers/shared-redis.js';
import { token } from '../helpers/tokens.js';

/** Recorded by Prometheus itself for each target, never on `/metrics`. */
const PROMETHEUS_OWN = ['up'];

/** The sample names a family exposes: histograms add `_bucket`, `_sum` and `_count`. */
function sampleNames(exposition: Exposition): Set<string> {
  const names = new Set<string>();
  for (const [family, type] of exposition.types) {
    names.add(family);
    if (type === 'histogram') for (const suffix of ['_bucket', '_sum', '_count']) names.add(`${family}${suffix}`);
    if (type === 'summary') for (const suffix of ['_sum', '_count']) names.add(`${family}${suffix}`);
  }
  return names;
}

let sandbox: Sandbox;
let redis: RedisServer;
let proxy: ProxyHandle;
let scraped: string;

beforeAll(async () => {
  sandbox = await startSandbox();
  redis = await startRedis();
  await settledOperatorState(redis);
  proxy = await startProxy({
    upstreamUrl: sandbox.url,
    redisUrl: redis.url,
    adminToken: 'observability-admin-token-of-some-length',
  });
  // A little traffic, so that the histograms and counters have series.
  const reader = await token({ company: 1, subject: 'observability' });
  expect((await getWithToken(proxy.url, `${API_PREFIX}/receipts?per_page=5`, reader)).status).toBe(200);
  expect((await getWithToken(proxy.url, `${API_PREFIX}/receipts?per_page=5`, reader)).status).toBe(200);
  const res = await send(proxy.adminUrl ?? '', '/metrics');
  expect(res.status).toBe(200);
  scraped = res.text;
});

afterAll(async () => {
  await proxy.close();
  await sandbox.close();
  await redis.stop();
});

describe('the dashboard and the alert rules against /metrics', () => {
  it('select only metrics the proxy exposes', async () => {
    const exposed = sampleNames(parseExposition(scraped));
    const used = new Set(observabilityExpressions().flatMap(metricNames));
    for (const name of used) {
      if (PROMETHEUS_OWN.includes(name)) continue;
      expect(exposed, name).toContain(name);
    }
  });

  it("show every family of the proxy's own on the dashboard", () => {
    const onDashboard = new Set(
      readDashboard().panels.flatMap((panel) => (panel.targets ?? []).flatMap((target) => metricNames(target.expr))),
    );
    const families = [...parseExposition(scraped).types.entries()].filter(([name]) => name.startsWith('slab_proxy_'));
    for (const [family, type] of families) {
      const shown = onDashboard.has(family) || (type === 'histogram' && onDashboard.has(`${family}_bucket`));
      expect(shown, family).toBe(true);
    }
  });

  it("pass promtool's metric lint, but for prom-client's standard Node.js names", () => {
    const linted = spawnSync('promtool', ['check', 'metrics'], { input: scraped, encoding: 'utf8' });
    if (linted.error !== undefined)
      throw new Error(`promtool is not installed (Debian: apt-get install prometheus): ${linted.error.message}`);
    const findings = `${linted.stdout}${linted.stderr}`.split('\n').filter((line) => line.trim() !== '');
    // prom-client's `nodejs_active_*_total` gauges keep the names stock Node.js dashboards use.
    expect(findings.filter((line) => !/^nodejs_active_[a-z]+_total /.test(line))).toEqual([]);
  });
});
