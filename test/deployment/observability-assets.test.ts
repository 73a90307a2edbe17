/**
 * deploy/observability/: the alert rules pass `promtool check rules` and their own unit tests
 * (`promtool test rules`: each alert fires on the series that should fire it and stays quiet on
 * near misses), with the alerts the operators need; the Grafana dashboard is well formed (unique
 * ids, a 24-column grid without overlaps, every query on the chosen Prometheus data source) and
 * every query in both is PromQL. That the metric names exist is checked against a running proxy
 * (test/deployment/observability-metrics.test.ts).
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import {
  metricNames,
  observabilityExpressions,
  RULES_FILE,
  RULES_TEST_FILE,
  readDashboard,
  readRules,
} from '../helpers/promql.js';

/** promtool, from Debian's `prometheus` package (`.ci/run` installs it when missing). */
function promtool(...args: string[]): { status: number | null; output: string } {
  const run = spawnSync('promtool', args, { encoding: 'utf8' });
  if (run.error !== undefined)
    throw new Error(`promtool is not installed (Debian: apt-get install prometheus): ${run.error.message}`);
  return { status: run.status, output: `${run.stdout}${run.stderr}` };
}

describe('alert rules', () => {
  it('pass promtool check rules', () => {
    const checked = promtool('check', 'rules', RULES_FILE);
    expect(checked.output).toMatch(/SUCCESS: \d+ rules found/);
    expect(checked.status).toBe(0);
  });

  it('pass their unit tests (promtool test rules)', () => {
    const tested = promtool('test', 'rules', RULES_TEST_FILE);
    expect(tested.output).toContain('SUCCESS');
    expect(tested.status).toBe(0);
  });

  it('alert on a hit-ratio drop, upstream errors, an open breaker, Redis down, stale operator state and 5xx answers, each tested', () => {
    const rules = readRules().groups.flatMap((group) => group.rules);
    const names = rules.map((rule) => rule.alert);
    expect(names).toEqual(
      expect.arrayContaining([
        'SlabProxyHitRatioLow',
        'SlabProxyUpstreamErrors',
        'SlabProxyUpstreamBreakerOpen',
        'SlabProxyRedisDown',
        'SlabProxyOperatorStateStale',
        'SlabProxyHigh5xxRate',
      ]),
    );
    expect(new Set(names).size).toBe(names.length);
    for (const rule of rules) {
      expect(['warning', 'critical'], rule.alert).toContain(rule.labels?.severity);
      expect(rule.annotations?.summary, rule.alert).toBeTruthy();
      expect(rule.annotations?.description, rule.alert).toBeTruthy();
    }
    // Every alert has a unit test in which it fires (and promtool runs them, above).
    const unitTests = parseYaml(readFileSync(RULES_TEST_FILE, 'utf8')) as {
      tests: ReadonlyArray<{ alert_rule_test: ReadonlyArray<{ alertname: string; exp_alerts: readonly unknown[] }> }>;
    };
    const firing = new Set(
      unitTests.tests.flatMap((test) =>
        test.alert_rule_test.filter((t) => t.exp_alerts.length > 0).map((t) => t.alertname),
      ),
    );
    expect([...firing].sort()).toEqual([...names].sort());
  });
});

describe('Grafana dashboard', () => {
  const dashboard = readDashboard();
  const panels = dashboard.panels.filter((panel) => panel.type !== 'row');

  it('is a dashboard with a stable uid and a Prometheus data source variable', () => {
    expect(dashboard.uid).toBe('slab-ops-proxy');
    expect(dashboard.schemaVersion).toBeGreaterThanOrEqual(36);
    expect(dashboard.templating.list.find((v) => v.name === 'datasource')).toMatchObject({
      type: 'datasource',
      query: 'prometheus',
    });
  });

  it('lays its panels on the 24-column grid without overlaps, each with a unique id', () => {
    const ids = dashboard.panels.map((panel) => panel.id);
    expect(new Set(ids).size).toBe(ids.length);
    const cells = new Set<string>();
    for (const { gridPos, title } of dashboard.panels) {
      expect(gridPos.x + gridPos.w, title).toBeLessThanOrEqual(24);
      for (let x = gridPos.x; x < gridPos.x + gridPos.w; x++) {
        for (let y = gridPos.y; y < gridPos.y + gridPos.h; y++) {
          expect(cells.has(`${String(x)},${String(y)}`), `${title} overlaps at ${String(x)},${String(y)}`).toBe(false);
          cells.add(`${String(x)},${String(y)}`);
        }
      }
    }
  });

  it('queries the chosen data source in every panel', () => {
    for (const panel of panels) {
      expect(panel.datasource?.uid, panel.title).toBe('${datasource}');
      expect(panel.targets?.length ?? 0, panel.title).toBeGreaterThan(0);
      for (const target of panel.targets ?? [])
        expect(target.datasource?.uid ?? panel.datasource?.uid, panel.title).toBe('${datasource}');
    }
  });

  it('shows what an operator looks at: traffic by status and cache result, latency, upstream, coalescing, 429s, Redis, the breaker, the event loop', () => {
    const used = new Set(
      panels.flatMap((panel) => (panel.targets ?? []).flatMap((target) => metricNames(target.expr))),
    );
    for (const name of [
      'slab_proxy_requests_total',
      'slab_proxy_request_duration_seconds_bucket',
      'slab_proxy_upstream_requests_total',
      'slab_proxy_upstream_refusals_total',
      'slab_proxy_coalesced_waits_total',
      'slab_proxy_rate_limited_total',
      'slab_proxy_redis_errors_total',
      'slab_proxy_redis_up',
      'slab_proxy_upstream_circuit_state',
      'nodejs_eventloop_lag_p99_seconds',
    ]) {
      expect([...used], name).toContain(name);
    }
  });
});

describe('PromQL', () => {
  it('every query of the dashboard and the rules parses', () => {
    const expressions = observabilityExpressions();
    expect(expressions.length).toBeGreaterThan(20);
    for (const expression of expressions) expect(() => metricNames(expression), expression).not.toThrow();
  });

  it('the reader does read: a broken query fails, and names are the selected metrics', () => {
    expect(() => metricNames('sum(rate(slab_proxy_requests_total[5m])')).toThrow();
    expect(
      metricNames('sum by (le) (rate(a_bucket{job=~"$job"}[$__rate_interval])) / on (job) b and c').sort(),
    ).toEqual(['a_bucket', 'b', 'c']);
  });
});
