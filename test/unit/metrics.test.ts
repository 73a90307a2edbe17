/**
 * The metrics module: the hot-path histogram recorded off prom-client reads exactly as
 * prom-client's own would, counters pending since the last scrape are all handed over, labels stay
 * bounded whatever the input, and the whole text parses as the Prometheus format.
 */
import { readFileSync } from 'node:fs';
import { Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { createMetrics } from '../../src/observability/metrics.js';
import { parseExposition } from '../helpers/prometheus.js';

const BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

describe('metrics', () => {
  it("records request durations exactly as prom-client's own histogram does", async () => {
    const durations = [0.00003, 0.0001, 0.0004, 0.002, 0.0025, 0.7, 3, 12, 0.05, 0.05];
    const metrics = createMetrics({ processMetrics: false });
    const registry = new Registry();
    const reference = new Histogram({
      name: 'slab_proxy_request_duration_seconds',
      help: 'x',
      labelNames: ['cache'],
      buckets: BUCKETS,
      registers: [registry],
    });
    durations.forEach((seconds, i) => {
      const cache = i % 2 === 0 ? 'hit' : 'miss';
      metrics.request('receipts', 200, cache, seconds);
      reference.observe({ cache }, seconds);
    });
    const ours = parseExposition(await metrics.render()).series('slab_proxy_request_duration_seconds_bucket');
    const theirs = parseExposition(await registry.metrics()).series('slab_proxy_request_duration_seconds_bucket');
    expect(ours).toEqual(theirs);
    const oursText = parseExposition(await metrics.render());
    const theirsText = parseExposition(await registry.metrics());
    for (const cache of ['hit', 'miss']) {
      expect(oursText.value('slab_proxy_request_duration_seconds_count', { cache })).toBe(
        theirsText.value('slab_proxy_request_duration_seconds_count', { cache }),
      );
      expect(oursText.value('slab_proxy_request_duration_seconds_sum', { cache })).toBeCloseTo(
        theirsText.value('slab_proxy_request_duration_seconds_sum', { cache }),
        12,
      );
    }
  });

  it('hands every request counted between scrapes to the counter, once', async () => {
    const metrics = createMetrics({ processMetrics: false });
    for (let i = 0; i < 5; i++) metrics.request('receipts', 200, 'hit', 0.00002);
    expect(
      parseExposition(await metrics.render()).value('slab_proxy_requests_total', {
        resource: 'receipts',
        status: '200',
        cache: 'hit',
      }),
    ).toBe(5);
    metrics.request('receipts', 200, 'hit', 0.00002);
    metrics.request('receipts', 401, undefined, 0.00002);
    const text = parseExposition(await metrics.render());
    expect(text.value('slab_proxy_requests_total', { resource: 'receipts', status: '200', cache: 'hit' })).toBe(6);
    expect(text.value('slab_proxy_requests_total', { resource: 'receipts', status: '401', cache: 'none' })).toBe(1);
    // A scrape with nothing new changes nothing.
    expect(
      parseExposition(await metrics.render()).value('slab_proxy_requests_total', {
        resource: 'receipts',
        status: '200',
        cache: 'hit',
      }),
    ).toBe(6);
  });

  it('keeps labels bounded: a client-chosen resource or an odd status never becomes a label value', async () => {
    const metrics = createMetrics({ processMetrics: false });
    metrics.request('../../etc/passwd', 404, undefined, 0.001);
    metrics.request('company-42-secret', 404, undefined, 0.001);
    metrics.request(undefined, 400, undefined, 0.001);
    metrics.request('receipts', 1234, 'miss', 0.001);
    metrics.upstream('not-a-resource', 999, 0.01);
    const text = await metrics.render();
    const exposition = parseExposition(text);
    expect(text).not.toContain('passwd');
    expect(text).not.toContain('company-42');
    expect(exposition.value('slab_proxy_requests_total', { resource: 'other', status: '404', cache: 'none' })).toBe(2);
    expect(exposition.value('slab_proxy_requests_total', { resource: 'other', status: '400', cache: 'none' })).toBe(1);
    expect(
      exposition.value('slab_proxy_requests_total', { resource: 'receipts', status: 'other', cache: 'miss' }),
    ).toBe(1);
    expect(exposition.value('slab_proxy_upstream_requests_total', { resource: 'other', status: 'other' })).toBe(1);
    const labelNames = new Set(
      [...exposition.samples.keys()].flatMap((series) => [...series.matchAll(/([a-z_]+)="/g)].map((m) => m[1])),
    );
    // `company` is bounded by its own rule (at most ten named, the rest other: company-usage.test.ts).
    expect([...labelNames].sort()).toEqual([
      'cache',
      'company',
      'component',
      'gap',
      'le',
      'node',
      'policy',
      'reason',
      'resource',
      'result',
      'scope',
      'status',
      'version',
    ]);
  });

  it('reads the circuit and Redis state at scrape time, and starts every known counter at zero', async () => {
    let state: 'closed' | 'half-open' | 'open' = 'closed';
    let up = true;
    const metrics = createMetrics({ processMetrics: false, circuitState: () => state, redisUp: () => up });
    let text = parseExposition(await metrics.render());
    expect(text.value('slab_proxy_upstream_circuit_state')).toBe(0);
    expect(text.value('slab_proxy_redis_up')).toBe(1);
    expect(text.samples.has('slab_proxy_rate_limited_total{policy="company"}')).toBe(true);
    expect(text.samples.has('slab_proxy_redis_errors_total{component="budget"}')).toBe(true);
    state = 'open';
    up = false;
    text = parseExposition(await metrics.render());
    expect(text.value('slab_proxy_upstream_circuit_state')).toBe(2);
    expect(text.value('slab_proxy_redis_up')).toBe(0);
    // Without Redis there is no such gauge.
    expect(
      parseExposition(await createMetrics({ processMetrics: false }).render()).series('slab_proxy_redis_up'),
    ).toEqual([]);
  });

  it("includes the process's own metrics under their standard names when asked, once per process", async () => {
    const a = parseExposition(await createMetrics().render());
    const b = parseExposition(await createMetrics().render());
    expect(a.types.get('process_cpu_user_seconds_total')).toBe('counter');
    expect(b.types.get('nodejs_heap_size_used_bytes')).toBe('gauge');
    expect(a.types.get('nodejs_eventloop_lag_p99_seconds')).toBe('gauge');
    expect(
      [...a.types.keys()].filter(
        (name) => name.startsWith('slab_proxy_process') || name.startsWith('slab_proxy_nodejs'),
      ),
    ).toEqual([]);
  });

  it('says which build runs: slab_proxy_build_info{version, node} is 1', async () => {
    const manifest = JSON.parse(readFileSync('package.json', 'utf8')) as { version: string };
    const text = parseExposition(await createMetrics({ processMetrics: false }).render());
    expect(text.types.get('slab_proxy_build_info')).toBe('gauge');
    expect(text.series('slab_proxy_build_info')).toEqual([
      { labels: { version: manifest.version, node: process.version }, value: 1 },
    ]);
  });

  it('reads the in-flight requests, the cache tiers and the state ages from their callbacks at each scrape', async () => {
    let inFlight = 3;
    let tiers = [{ tier: 'l1' as const, entries: 7, bytes: 9_000 }];
    let operatorAge = 2.5;
    let redisDown = 0;
    const metrics = createMetrics({
      processMetrics: false,
      inFlightRequests: () => inFlight,
      cacheFootprint: () => tiers,
      operatorStateAgeSeconds: () => operatorAge,
      redisDownSeconds: () => redisDown,
    });
    let text = parseExposition(await metrics.render());
    expect(text.value('slab_proxy_requests_in_flight')).toBe(3);
    expect(text.value('slab_proxy_cache_entries', { tier: 'l1' })).toBe(7);
    expect(text.value('slab_proxy_cache_bytes', { tier: 'l1' })).toBe(9_000);
    expect(text.value('slab_proxy_operator_state_age_seconds')).toBe(2.5);
    expect(text.value('slab_proxy_redis_down_seconds')).toBe(0);
    inFlight = 0;
    tiers = [{ tier: 'l1', entries: 8, bytes: 12_000 }];
    operatorAge = 40;
    redisDown = 12;
    text = parseExposition(await metrics.render());
    expect(text.value('slab_proxy_requests_in_flight')).toBe(0);
    expect(text.value('slab_proxy_cache_entries', { tier: 'l1' })).toBe(8);
    expect(text.value('slab_proxy_cache_bytes', { tier: 'l1' })).toBe(12_000);
    expect(text.value('slab_proxy_operator_state_age_seconds')).toBe(40);
    expect(text.value('slab_proxy_redis_down_seconds')).toBe(12);
    // Nothing feeds them: no such gauges (an absent series, not a misleading 0).
    const bare = parseExposition(await createMetrics({ processMetrics: false }).render());
    for (const name of [
      'slab_proxy_requests_in_flight',
      'slab_proxy_cache_entries',
      'slab_proxy_operator_state_age_seconds',
      'slab_proxy_redis_down_seconds',
    ]) {
      expect(bare.types.has(name), name).toBe(false);
    }
  });
});
