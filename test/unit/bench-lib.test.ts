/**
 * The bench's and load test's library where it can be checked without processes: the latency
 * histogram against exact percentiles, medians, the rotation of targets over rounds, Markdown
 * tables, the Lua strings of the wrk script, wrk's summary read into a result, a worker's result
 * read back (NaN survives JSON), the nginx config template, and the hit breakdown's printout and
 * BENCH_RESULT figures, and the tail probe's reading of two scrapes.
 */
import { readFileSync } from 'node:fs';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { type BreakdownReport, breakdownResult, EXCHANGE_ROW, formatBreakdown } from '../../bench/hit-breakdown.js';
import { markdownTable, runStamp } from '../../bench/lib/format.js';
import { type LoadRequest, parseLoadResult } from '../../bench/lib/load/types.js';
import { luaString, wrkResult, wrkScript } from '../../bench/lib/load/wrk.js';
import { NGINX_TEMPLATE, renderNginxConfig } from '../../bench/lib/nginx.js';
import { rotation } from '../../bench/lib/rounds.js';
import { LatencyHistogram, median } from '../../bench/lib/stats.js';
import { describeTail, parseSamples, tailBetween } from '../../bench/lib/tail-probe.js';

/** Nearest-rank percentile of exact values. */
function exactPercentile(sorted: readonly number[], p: number): number {
  return sorted[Math.max(1, Math.ceil((p / 100) * sorted.length)) - 1] ?? Number.NaN;
}

describe('LatencyHistogram', () => {
  it('gives every percentile exactly below 1 ms and within 0.1% above, and the exact maximum', () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 0, max: 120_000_000 }), { minLength: 1, maxLength: 400 }),
        fc.constantFrom(50, 90, 99, 99.9, 100),
        (micros, p) => {
          const histogram = new LatencyHistogram();
          for (const us of micros) histogram.record(us / 1000);
          const sorted = [...micros].sort((a, b) => a - b);
          const exact = exactPercentile(sorted, p);
          const got = histogram.percentileMs(p);
          if (exact < 1024) expect(got).toBe(exact / 1000);
          else expect(Math.abs(got * 1000 - exact) / exact).toBeLessThan(0.001);
          expect(histogram.maxMs).toBe((sorted[sorted.length - 1] ?? Number.NaN) / 1000);
          expect(histogram.count).toBe(micros.length);
        },
      ),
    );
  });

  it('adds another histogram as if its answers were recorded here', () => {
    const [a, b, both] = [new LatencyHistogram(), new LatencyHistogram(), new LatencyHistogram()];
    for (const ms of [0.2, 1.5, 30, 7_000]) {
      a.record(ms);
      both.record(ms);
    }
    for (const ms of [0.9, 2.5, 45]) {
      b.record(ms);
      both.record(ms);
    }
    a.add(b);
    for (const p of [10, 50, 90, 99, 100]) expect(a.percentileMs(p)).toBe(both.percentileMs(p));
    expect(a.count).toBe(7);
    expect(a.maxMs).toBe(7_000);
  });

  it('has no percentiles when empty', () => {
    expect(new LatencyHistogram().percentileMs(50)).toBeNaN();
    expect(new LatencyHistogram().maxMs).toBeNaN();
  });
});

describe('median and rotation', () => {
  it('takes the middle of the finite values', () => {
    expect(median([3, 1, 2])).toBe(2);
    expect(median([4, 1, 3, 2])).toBe(2.5);
    expect(median([Number.NaN, 5, Number.POSITIVE_INFINITY])).toBe(5);
    expect(median([])).toBeNaN();
  });

  it('puts every target in every position over as many rounds as there are targets', () => {
    const targets = ['bare', 'nginx', 'proxy'];
    const rounds = [1, 2, 3].map((round) => rotation(targets, round));
    expect(rounds).toEqual([
      ['bare', 'nginx', 'proxy'],
      ['nginx', 'proxy', 'bare'],
      ['proxy', 'bare', 'nginx'],
    ]);
    for (let position = 0; position < 3; position++)
      expect(new Set(rounds.map((r) => r[position]))).toEqual(new Set(targets));
  });
});

describe('Markdown for the docs', () => {
  it('aligns numbers right and escapes a cell’s pipe', () => {
    expect(markdownTable(['target', 'req/s'], [['a|b', '1,000']])).toEqual([
      '| target | req/s |',
      '|---|---:|',
      '| a\\|b | 1,000 |',
    ]);
  });

  it('stamps figures with the command, the date and the cores', () => {
    expect(runStamp('npm run bench', ['wrk 4.1.0'], new Date('2026-11-23T10:00:00Z'))).toMatch(
      /^`npm run bench`, 2026-11-23, \d+ cores?, wrk 4\.1\.0$/,
    );
  });
});

/** Reads a Lua string literal of the kind luaString writes: plain characters and \ddd escapes. */
function readLua(literal: string): string {
  expect(literal.startsWith('"') && literal.endsWith('"')).toBe(true);
  const body = literal.slice(1, -1);
  expect(body).not.toMatch(/["\n\r]/);
  const bytes: number[] = [];
  for (let i = 0; i < body.length; i++) {
    if (body[i] === '\\') {
      bytes.push(Number(body.slice(i + 1, i + 4)));
      i += 3;
    } else {
      bytes.push(body.charCodeAt(i));
    }
  }
  return Buffer.from(bytes).toString('utf8');
}

describe('the wrk script', () => {
  it('writes any path or header value as a Lua string that reads back the same', () => {
    fc.assert(
      // Any code points, lone surrogates included (UTF-8 writes those as U+FFFD, so both sides do).
      fc.property(
        fc
          .array(fc.integer({ min: 0, max: 0x10ffff }), { maxLength: 40 })
          .map((points) => String.fromCodePoint(...points)),
        (text) => {
          expect(readLua(luaString(text))).toBe(Buffer.from(text, 'utf8').toString('utf8'));
        },
      ),
    );
  });

  it('prepares each request with its own headers, and counts statuses only when a status is expected', () => {
    const requests: LoadRequest[] = [
      { path: '/a?x=1', headers: { authorization: 'Bearer one' } },
      { path: '/b', headers: { authorization: 'Bearer two', 'accept-encoding': 'br' } },
    ];
    const plain = wrkScript({ url: 'http://127.0.0.1:1', connections: 1, durationSec: 1, requests });
    expect(plain).toContain('wrk.format("GET", "/a?x=1", { ["authorization"] = "Bearer one" })');
    expect(plain).toContain(
      'wrk.format("GET", "/b", { ["authorization"] = "Bearer two", ["accept-encoding"] = "br" })',
    );
    expect(plain).not.toContain('response = function');
    expect(
      wrkScript({ url: 'http://127.0.0.1:1', connections: 1, durationSec: 1, expectStatus: 429, requests }),
    ).toContain('response = function');
  });

  it('reads wrk’s summary: answers above 399 are unexpected unless a status is expected', () => {
    const summary = {
      requests: 1000,
      duration_us: 2_000_000,
      bytes: 6_000_000,
      connect: 0,
      read: 1,
      write: 0,
      status: 10,
      timeout: 2,
      p50: 500,
      p90: 900,
      p99: 2_500,
      p999: 4_000,
      max: 9_000,
      cpu_s: 1.5,
      statuses: {},
    };
    const hits = wrkResult(summary, { url: 'http://x', connections: 1, durationSec: 2, requests: [] });
    expect(hits).toMatchObject({
      completed: 990,
      responses: 1000,
      unexpected: 10,
      errors: 3,
      rps: 495,
      p50Ms: 0.5,
      p99Ms: 2.5,
      maxMs: 9,
      bytesPerResponse: 6000,
      clientCpuPct: 75,
    });
    const refusals = wrkResult(
      { ...summary, statuses: { '429': 990, '200': 10 } },
      { url: 'http://x', connections: 1, durationSec: 2, expectStatus: 429, requests: [] },
    );
    expect(refusals).toMatchObject({ completed: 990, unexpected: 10, statusCodes: { '429': 990, '200': 10 } });
  });
});

describe('a load worker’s result line', () => {
  it('comes back with NaN where an empty run had no percentiles (JSON writes null)', () => {
    const line = JSON.stringify({
      generator: 'paced',
      completed: 0,
      responses: 0,
      unexpected: 0,
      errors: 3,
      durationSec: 1,
      rps: 0,
      p50Ms: Number.NaN,
      p90Ms: Number.NaN,
      p99Ms: Number.NaN,
      p999Ms: Number.NaN,
      maxMs: Number.NaN,
      bytesPerResponse: 0,
      statusCodes: {},
      clientCpuPct: 1,
    });
    const result = parseLoadResult(line);
    expect(result.p99Ms).toBeNaN();
    expect(result.errors).toBe(3);
    expect(() => parseLoadResult('{"generator":"paced"}')).toThrow(/completed missing/);
  });
});

describe('bench/nginx-cache.conf', () => {
  it('is filled in completely, and an unknown placeholder is refused', () => {
    const config = renderNginxConfig(readFileSync(NGINX_TEMPLATE, 'utf8'), {
      dir: '/tmp/run',
      port: 8123,
      originPort: 8124,
    });
    expect(config).not.toMatch(/\{\{/);
    expect(config).toContain('listen 127.0.0.1:8123;');
    expect(config).toContain('server 127.0.0.1:8124;');
    expect(config).toContain('proxy_cache_path /tmp/run/cache ');
    expect(() => renderNginxConfig('{{NOPE}}', { dir: '/tmp/run', port: 1, originPort: 2 })).toThrow(
      /unknown placeholder \{\{NOPE\}\}/,
    );
  });
});

describe('the hit breakdown’s report', () => {
  const longName = 'a step whose name is longer than any label the breakdown printed before it';
  const report: BreakdownReport = {
    rows: [
      { section: 'request flow', label: 'exchange (openExchange)', kind: 'step', us: 0.5, medianUs: 0.4 },
      { section: 'request flow', label: 'inbound limits', kind: 'step', us: 3, medianUs: 2 },
      { section: 'request flow', label: 'instead: in process', kind: 'detail', us: 0.4, medianUs: 0.4 },
      { section: 'request flow', label: longName, kind: 'step', us: 1.5, medianUs: 1.5 },
      { section: 'totals', label: 'Σ steps', kind: 'total', us: 5, medianUs: 3.9 },
    ],
    steps: [
      { name: EXCHANGE_ROW, us: 0.5, medianUs: 0.4 },
      { name: 'inbound limits', us: 3, medianUs: 2 },
      { name: longName, us: 1.5, medianUs: 1.5 },
    ],
    stepSumUs: 5,
    dataPlaneUs: 6,
    baselineWriteUs: 0.5,
    extraOverBaselineUs: 5.5,
    storeMissAmortisedUs: undefined,
    notes: ['steps a hit never reaches (answered before them): after'],
  };

  it('names the BENCH_RESULT figures after the steps, in their order, then the whole data plane', () => {
    expect(breakdownResult(report)).toEqual({
      exchange: 0.5,
      inbound_limits: 3,
      a_step_whose_name_is_longer_than_any_label_the_breakdown_printed_before_it: 1.5,
      data_plane: 6,
    });
  });

  it('prints every row under its section, aligned however long a step’s name, with the notes', () => {
    const lines = formatBreakdown(report).split('\n');
    expect(lines).toContain('  [request flow]');
    expect(lines).toContain('  [totals]');
    const stepLines = lines.filter((line) => /\d%$/.test(line));
    expect(stepLines).toHaveLength(3); // a share for each step, none for a detail or a total
    expect(new Set(stepLines.map((line) => line.length)).size).toBe(1);
    expect(lines.find((line) => line.includes('instead: in process'))).toMatch(/^ {6}instead/);
    expect(lines).toContain(`  by step (µs): exchange 0.50 · inbound limits 3.00 · ${longName} 1.50`);
    expect(lines.at(-1)).toBe('  note: steps a hit never reaches (answered before them): after');
  });
});

describe('the tail probe', () => {
  const scrape = (major: number, minorSum: number, over10: number, lagMax: number, misses: number): string =>
    [
      '# HELP nodejs_eventloop_lag_max_seconds The maximum recorded event loop delay.',
      '# TYPE nodejs_eventloop_lag_max_seconds gauge',
      `nodejs_eventloop_lag_max_seconds ${String(lagMax)}`,
      `nodejs_gc_duration_seconds_bucket{le="0.001",kind="minor"} 10`,
      `nodejs_gc_duration_seconds_bucket{le="0.01",kind="minor"} 20`,
      `nodejs_gc_duration_seconds_bucket{le="+Inf",kind="minor"} 20`,
      `nodejs_gc_duration_seconds_sum{kind="minor"} ${String(minorSum)}`,
      `nodejs_gc_duration_seconds_bucket{le="0.01",kind="major"} 1`,
      `nodejs_gc_duration_seconds_bucket{le="+Inf",kind="major"} ${String(1 + over10)}`,
      `nodejs_gc_duration_seconds_sum{kind="major"} ${String(major)}`,
      `slab_proxy_l1_lookups_total{result="hit"} 5000`,
      `slab_proxy_l1_lookups_total{result="miss"} ${String(misses)}`,
      `slab_proxy_upstream_requests_total{resource="receipts",outcome="ok"} 3`,
      `slab_proxy_requests_total{resource="movements",status="200",cache="hit"} 9000`,
      `slab_proxy_requests_total{resource="movements",status="200",cache="miss"} ${String(misses * 2)}`,
      `slab_proxy_requests_total{resource="movements",status="200",cache="collapsed"} ${String(misses)}`,
      `slab_proxy_request_duration_seconds_bucket{le="0.01",cache="hit"} ${String(9000 + misses * 100 - over10)}`,
      `slab_proxy_request_duration_seconds_bucket{le="+Inf",cache="hit"} ${String(9000 + misses * 100)}`,
      `slab_proxy_request_duration_seconds_bucket{le="0.01",cache="miss"} 0`,
      `slab_proxy_request_duration_seconds_bucket{le="+Inf",cache="miss"} ${String(misses * 2)}`,
      '',
    ].join('\n');

  it('reads a round as the difference of two scrapes, the loop delay as the later one', () => {
    const before = parseSamples(scrape(0.01, 0.02, 0, 0.5, 7));
    const after = parseSamples(scrape(0.061, 0.032, 2, 0.0425, 19));
    const tail = tailBetween(before, after);
    expect(tail.loopDelayMaxMs).toBeCloseTo(42.5, 6);
    expect(tail.gcMs.major).toBeCloseTo(51, 6);
    expect(tail.gcMs.minor).toBeCloseTo(12, 6);
    expect(tail.gcPausesOver10Ms).toBe(2);
    expect(tail.storeReads).toBe(12);
    expect(tail.upstreamRequests).toBe(0);
    expect(tail.waitedForUpstream).toBe(36); // 12 more misses (24) and collapsed reads (12)
    expect(tail.slowCopies).toBe(2); // hits over 10 ms; the misses' slow answers are not copies
    expect(describeTail([tail], median)).toBe(
      'loop delay max 42.5 ms, GC 63.0 ms a round (major 51.0 ms), pauses > 10 ms 2.0, store reads 12.0, upstream 0.0, ' +
        'answers that waited for it 36.0, copies served in over 10 ms 2.0',
    );
  });
});
