/**
 * OpenTelemetry tracing (docs/operations.md#tracing), through the real proxy in front of the real sandbox:
 * the spans of a miss, a hit, a 401 and the coalesced waits (in one process, and across two
 * replicas sharing a real redis-server), read from the SDK's in-memory exporter; W3C Trace Context
 * taken from the client and sent upstream (the sandbox records the headers it received); a
 * malformed `traceparent` ignored; no token, company, subject or query value in any span; and a
 * real OTLP/HTTP export to an in-process receiver, configured from the environment as `npm start`
 * configures it.
 */
import { once } from 'node:events';
import { SpanKind, SpanStatusCode } from '@opentelemetry/api';
import { InMemorySpanExporter, type ReadableSpan, SimpleSpanProcessor } from '@opentelemetry/sdk-trace';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { API_PREFIX } from '../../src/catalog/resources.js';
import { loadEnv } from '../../src/config/load.js';
import { startTracing, type TracesSampler, type TracingRuntime } from '../../src/observability/tracing-sdk.js';
import type { Sandbox } from '../../src/sandbox/server.js';
import { type ProxyHandle, startProxy, startSandbox, upstreamCount } from '../helpers/env.js';
import { getWithToken, type RawResponse, send } from '../helpers/http.js';
import { type OtlpReceiver, type ReceivedExport, startOtlpReceiver } from '../helpers/otlp-receiver.js';
import { type RedisServer, startRedis } from '../helpers/redis.js';
import { settledOperatorState } from '../helpers/shared-redis.js';
import { token } from '../helpers/tokens.js';

const P = API_PREFIX;
const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const PARENT = '00f067aa0ba902b7';

interface Recorder {
  readonly exporter: InMemorySpanExporter;
  readonly runtime: TracingRuntime;
}

async function inMemoryTracing(sampler: TracesSampler = 'parentbased_always_on'): Promise<Recorder> {
  const exporter = new InMemorySpanExporter();
  const runtime = await startTracing({
    serviceName: 'slab-ops-proxy',
    sampler,
    samplerRatio: 1,
    spanProcessors: [new SimpleSpanProcessor({ exporter })],
  });
  return { exporter, runtime };
}

/** Every span of the recorder, once exported (the request's span ends before its answer is read). */
async function spans(recorder: Recorder): Promise<ReadableSpan[]> {
  await recorder.runtime.forceFlush();
  return recorder.exporter.getFinishedSpans();
}

/** The SERVER span of the request sent with this `X-Request-Id`. */
async function requestSpan(recorder: Recorder, requestId: string): Promise<ReadableSpan> {
  const found = (await spans(recorder)).filter(
    (span) => span.kind === SpanKind.SERVER && span.attributes['slab_proxy.request_id'] === requestId,
  );
  expect(found, `one request span for ${requestId}`).toHaveLength(1);
  return found[0] as ReadableSpan;
}

/** The other spans of a request span's trace that are its children. */
async function childrenOf(recorder: Recorder, parent: ReadableSpan): Promise<ReadableSpan[]> {
  const { traceId, spanId } = parent.spanContext();
  return (await spans(recorder)).filter(
    (span) => span.spanContext().traceId === traceId && span.parentSpanContext?.spanId === spanId,
  );
}

function names(list: readonly ReadableSpan[]): string[] {
  return list.map((span) => span.name).sort();
}

function byName(list: readonly ReadableSpan[], name: string): ReadableSpan {
  const found = list.find((span) => span.name === name);
  if (found === undefined) throw new Error(`no span named ${name} among ${names(list).join(', ')}`);
  return found;
}

function get(url: string, target: string, bearer: string, headers: ReadonlyArray<readonly [string, string]> = []) {
  return getWithToken(url, target, bearer, { headers });
}

/** The trace headers the sandbox received for a request id (what went upstream). */
function receivedBy(sandbox: Sandbox, requestId: string) {
  const found = sandbox.received().filter((r) => r.requestId === requestId);
  expect(found, `upstream requests for ${requestId}`).toHaveLength(1);
  return found[0] as NonNullable<(typeof found)[number]>;
}

describe('tracing on one proxy (in-memory exporter)', () => {
  let sandbox: Sandbox;
  let proxy: ProxyHandle;
  let recorder: Recorder;
  let bearer: string;

  beforeAll(async () => {
    recorder = await inMemoryTracing();
    bearer = await token();
  });
  afterAll(() => recorder.runtime.shutdown());
  beforeEach(async () => {
    recorder.exporter.reset();
    sandbox = await startSandbox();
    proxy = await startProxy({ upstreamUrl: sandbox.url, tracing: recorder.runtime.tracing });
  });
  afterEach(async () => {
    await proxy.close();
    await sandbox.close();
  });

  it('a miss: the request span, the store lookup and the upstream exchange, whose span the upstream is told', async () => {
    const res = await get(proxy.url, `${P}/receipts?per_page=2`, bearer, [['X-Request-Id', 'miss-1']]);
    expect(res.status).toBe(200);
    const server = await requestSpan(recorder, 'miss-1');
    expect(server.name).toBe(`GET ${P}/receipts`);
    expect(server.parentSpanContext).toBeUndefined();
    expect(server.status.code).toBe(SpanStatusCode.UNSET);
    expect(server.attributes).toEqual({
      'http.request.method': 'GET',
      'url.scheme': 'http',
      'http.route': `${P}/receipts`,
      'http.response.status_code': 200,
      'slab_proxy.resource': 'receipts',
      'slab_proxy.request_id': 'miss-1',
      'slab_proxy.cache.result': 'miss',
    });
    const children = await childrenOf(recorder, server);
    expect(names(children)).toEqual(['GET', 'cache lookup']);
    const lookup = byName(children, 'cache lookup');
    expect(lookup.kind).toBe(SpanKind.INTERNAL);
    expect(lookup.attributes).toEqual({ 'slab_proxy.cache.lookup': 'miss' });
    const upstream = byName(children, 'GET');
    expect(upstream.kind).toBe(SpanKind.CLIENT);
    expect(upstream.status.code).toBe(SpanStatusCode.UNSET);
    expect(upstream.attributes).toMatchObject({
      'http.request.method': 'GET',
      'http.response.status_code': 200,
      'server.address': '127.0.0.1',
      'server.port': Number(new URL(sandbox.url).port),
      'slab_proxy.resource': 'receipts',
    });
    expect(upstream.attributes['slab_proxy.upstream_ms']).toBeGreaterThan(0);
    // W3C Trace Context upstream: the upstream's spans become children of the CLIENT span.
    const sent = receivedBy(sandbox, 'miss-1');
    expect(sent.traceparent).toBe(`00-${upstream.spanContext().traceId}-${upstream.spanContext().spanId}-01`);
    expect(sent.tracestate).toBeUndefined();
  });

  it('a hit held in the process: the request span alone (no lookup, no upstream)', async () => {
    const target = `${P}/warehouses?per_page=3`;
    expect((await get(proxy.url, target, bearer, [['X-Request-Id', 'fill-1']])).status).toBe(200);
    const res = await get(proxy.url, target, bearer, [['X-Request-Id', 'hit-1']]);
    expect(res.headers['cache-status']).toMatch(/^slab-proxy; hit/);
    const server = await requestSpan(recorder, 'hit-1');
    expect(server.attributes).toMatchObject({ 'slab_proxy.cache.result': 'hit', 'http.response.status_code': 200 });
    expect(await childrenOf(recorder, server)).toEqual([]);
    expect(sandbox.received().map((r) => r.requestId)).toEqual(['fill-1']);
  });

  it("a client's traceparent makes the request span its child; its tracestate goes upstream", async () => {
    await get(proxy.url, `${P}/receipts?per_page=3`, bearer, [
      ['X-Request-Id', 'child-1'],
      ['traceparent', `00-${TRACE}-${PARENT}-01`],
      ['tracestate', 'rojo=00f067aa0ba902b7, congo=t61rcWkgMzE'],
    ]);
    const server = await requestSpan(recorder, 'child-1');
    expect(server.spanContext().traceId).toBe(TRACE);
    expect(server.parentSpanContext).toMatchObject({ traceId: TRACE, spanId: PARENT, isRemote: true });
    const upstream = byName(await childrenOf(recorder, server), 'GET');
    const sent = receivedBy(sandbox, 'child-1');
    expect(sent.traceparent).toBe(`00-${TRACE}-${upstream.spanContext().spanId}-01`);
    expect(sent.tracestate).toBe('rojo=00f067aa0ba902b7,congo=t61rcWkgMzE');
  });

  it('an unsampled parent is followed: nothing recorded, the trace still propagated upstream', async () => {
    const res = await get(proxy.url, `${P}/receipts?per_page=4`, bearer, [
      ['X-Request-Id', 'unsampled-1'],
      ['traceparent', `00-${TRACE}-${PARENT}-00`],
    ]);
    expect(res.status).toBe(200);
    expect((await spans(recorder)).filter((span) => span.spanContext().traceId === TRACE)).toEqual([]);
    const sent = receivedBy(sandbox, 'unsampled-1').traceparent ?? '';
    expect(sent).toMatch(new RegExp(`^00-${TRACE}-[0-9a-f]{16}-00$`));
    expect(sent).not.toContain(PARENT);
  });

  it.each([
    ['upper-case hex', [['traceparent', `00-${TRACE.toUpperCase()}-${PARENT}-01`]]],
    ['version ff', [['traceparent', `ff-${TRACE}-${PARENT}-01`]]],
    ['an all-zero trace-id', [['traceparent', `00-${'0'.repeat(32)}-${PARENT}-01`]]],
    ['garbage', [['traceparent', 'not a trace, <script>']]],
    [
      'two traceparent headers',
      [
        ['traceparent', `00-${TRACE}-${PARENT}-01`],
        ['traceparent', `00-${TRACE}-${PARENT}-01`],
      ],
    ],
  ] as const)(
    'a malformed traceparent (%s) is ignored: a new trace, its tracestate dropped, the answer as usual',
    async (_name, headers) => {
      const id = `malformed-${Math.random().toString(36).slice(2)}`;
      const res = await get(proxy.url, `${P}/movements?per_page=5`, bearer, [
        ['X-Request-Id', id],
        ...headers,
        ['tracestate', 'rojo=1'],
      ]);
      expect(res.status).toBe(200);
      const server = await requestSpan(recorder, id);
      expect(server.parentSpanContext).toBeUndefined();
      expect(server.spanContext().traceId).not.toBe(TRACE);
      const sent = receivedBy(sandbox, id);
      expect(sent.traceparent).toMatch(new RegExp(`^00-${server.spanContext().traceId}-[0-9a-f]{16}-01$`));
      expect(sent.tracestate).toBeUndefined();
    },
  );

  it('a 401: the request span with its status and problem code, nothing looked up or fetched', async () => {
    const res = await get(proxy.url, `${P}/receipts`, `${bearer.slice(0, -4)}AAAA`, [['X-Request-Id', 'refused-1']]);
    expect(res.status).toBe(401);
    const server = await requestSpan(recorder, 'refused-1');
    expect(server.attributes).toMatchObject({
      'http.response.status_code': 401,
      'slab_proxy.error_code': 'unauthenticated',
      'slab_proxy.resource': 'receipts',
    });
    expect(server.attributes['slab_proxy.cache.result']).toBeUndefined();
    // A 4xx is the client's: the server span is not an error (HTTP semantic conventions).
    expect(server.status.code).toBe(SpanStatusCode.UNSET);
    expect(await childrenOf(recorder, server)).toEqual([]);
    expect(sandbox.received()).toEqual([]);
  });

  it('an upstream 5xx: the CLIENT and SERVER spans are errors, with error.type', async () => {
    sandbox.faults.set({ status: 503, times: 1 });
    const res = await get(proxy.url, `${P}/stocktakes`, bearer, [['X-Request-Id', 'broken-1']]);
    expect(res.status).toBe(502);
    const server = await requestSpan(recorder, 'broken-1');
    expect(server.status.code).toBe(SpanStatusCode.ERROR);
    expect(server.attributes).toMatchObject({ 'error.type': '502', 'slab_proxy.error_code': 'bad_gateway' });
    const upstream = byName(await childrenOf(recorder, server), 'GET');
    expect(upstream.status.code).toBe(SpanStatusCode.ERROR);
    expect(upstream.attributes).toMatchObject({ 'http.response.status_code': 503, 'error.type': '503' });
  });

  it('followers in the process: a coalesced wait linked to the leader’s request, which alone went upstream', async () => {
    const target = `${P}/transfers?per_page=7`;
    // The leader's upstream answer is held back long enough for the follower to join its fill.
    sandbox.faults.set({ latencyMs: 1_000, times: 1 });
    const leaderArrived = once(sandbox.server, 'request');
    const leader = get(proxy.url, target, bearer, [['X-Request-Id', 'leader-1']]);
    await leaderArrived;
    const follower = await get(proxy.url, target, bearer, [['X-Request-Id', 'follower-1']]);
    expect((await leader).headers['cache-status']).toBe('slab-proxy; fwd=miss; fwd-status=200; stored');
    expect(follower.headers['cache-status']).toBe('slab-proxy; fwd=miss; fwd-status=200; collapsed');
    expect(upstreamCount(sandbox, target)).toBe(1);

    const leaderSpan = await requestSpan(recorder, 'leader-1');
    const followerSpan = await requestSpan(recorder, 'follower-1');
    expect(followerSpan.attributes['slab_proxy.cache.result']).toBe('collapsed');
    expect(names(await childrenOf(recorder, leaderSpan))).toEqual(['GET', 'cache lookup']);
    const followerChildren = await childrenOf(recorder, followerSpan);
    expect(names(followerChildren)).toEqual(['cache lookup', 'coalesced wait']);
    const wait = byName(followerChildren, 'coalesced wait');
    expect(wait.attributes).toEqual({ 'slab_proxy.coalesce.scope': 'process', 'slab_proxy.coalesce.shared': true });
    // A link, not a parent: the follower's trace stays its client's; the link leads to the fetch.
    expect(wait.links.map((link) => link.context)).toEqual([leaderSpan.spanContext()]);
    expect(followerSpan.spanContext().traceId).not.toBe(leaderSpan.spanContext().traceId);
  });
});

describe("tracing off: the client's trace context passes through (W3C Trace Context §3)", () => {
  let sandbox: Sandbox;
  let proxy: ProxyHandle;
  beforeAll(async () => {
    sandbox = await startSandbox();
    proxy = await startProxy({ upstreamUrl: sandbox.url });
  });
  afterAll(async () => {
    await proxy.close();
    await sandbox.close();
  });

  it("sends the client's traceparent and tracestate upstream as it sent them", async () => {
    const traceparent = `00-${TRACE}-${PARENT}-01`;
    const res = await get(proxy.url, `${P}/receipts?per_page=2`, await token(), [
      ['X-Request-Id', 'untraced-1'],
      ['traceparent', traceparent],
      ['tracestate', 'rojo=00f067aa0ba902b7,congo=t61rcWkgMzE'],
    ]);
    expect(res.status).toBe(200);
    expect(receivedBy(sandbox, 'untraced-1')).toEqual({
      target: `${P}/receipts?per_page=2`,
      traceparent,
      tracestate: 'rojo=00f067aa0ba902b7,congo=t61rcWkgMzE',
      requestId: 'untraced-1',
    });
  });

  it('passes an unsampled parent and a later version on unchanged', async () => {
    const unsampled = `00-${TRACE}-${PARENT}-00`;
    const later = `01-${TRACE}-${PARENT}-01-what-a-later-version-adds`;
    const bearer = await token();
    expect(
      (
        await get(proxy.url, `${P}/receipts?per_page=3`, bearer, [
          ['X-Request-Id', 'untraced-2'],
          ['traceparent', unsampled],
        ])
      ).status,
    ).toBe(200);
    expect(
      (
        await get(proxy.url, `${P}/receipts?per_page=4`, bearer, [
          ['X-Request-Id', 'untraced-3'],
          ['traceparent', later],
        ])
      ).status,
    ).toBe(200);
    expect(receivedBy(sandbox, 'untraced-2')).toMatchObject({ traceparent: unsampled, tracestate: undefined });
    expect(receivedBy(sandbox, 'untraced-3')).toMatchObject({ traceparent: later, tracestate: undefined });
  });

  it('passes on nothing for a malformed traceparent, and never a tracestate that holds a token', async () => {
    const bearer = await token();
    const malformed = await get(proxy.url, `${P}/receipts?per_page=5`, bearer, [
      ['X-Request-Id', 'untraced-4'],
      ['traceparent', `00-${TRACE.toUpperCase()}-${PARENT}-01`],
      ['tracestate', 'rojo=1'],
    ]);
    const secret = await get(proxy.url, `${P}/receipts?per_page=6`, bearer, [
      ['X-Request-Id', 'untraced-5'],
      ['traceparent', `00-${TRACE}-${PARENT}-01`],
      // The first two segments of a JWS: what a token looks like to the proxy (src/observability/secrets.ts).
      ['tracestate', 'rojo=eyJhbGciOiJIUzI1NiJ9.eyJjb21wYW55X2lkIjoxfQ'],
    ]);
    expect([malformed.status, secret.status]).toEqual([200, 200]);
    expect(receivedBy(sandbox, 'untraced-4')).toMatchObject({ traceparent: undefined, tracestate: undefined });
    expect(receivedBy(sandbox, 'untraced-5')).toMatchObject({
      traceparent: `00-${TRACE}-${PARENT}-01`,
      tracestate: undefined,
    });
  });
});

describe('tracing across two replicas sharing Redis', () => {
  let redis: RedisServer;
  beforeAll(async () => {
    redis = await startRedis();
    await settledOperatorState(redis);
  });
  afterAll(() => redis.stop());

  it("a replica waiting on another's fill: a coalesced wait without a link, and no upstream exchange", async () => {
    const recorder = await inMemoryTracing();
    const sandbox = await startSandbox();
    const first = await startProxy({
      upstreamUrl: sandbox.url,
      redisUrl: redis.url,
      tracing: recorder.runtime.tracing,
    });
    const second = await startProxy({
      upstreamUrl: sandbox.url,
      redisUrl: redis.url,
      tracing: recorder.runtime.tracing,
    });
    try {
      const bearer = await token();
      const target = `${P}/remnants?per_page=9`;
      sandbox.faults.set({ latencyMs: 1_000, times: 1 });
      const leaderArrived = once(sandbox.server, 'request');
      const leader = get(first.url, target, bearer, [['X-Request-Id', 'replica-leader']]);
      await leaderArrived;
      const waiter = await get(second.url, target, bearer, [['X-Request-Id', 'replica-waiter']]);
      expect((await leader).status).toBe(200);
      expect(waiter.headers['cache-status']).toBe('slab-proxy; fwd=miss; fwd-status=200; collapsed');
      expect(upstreamCount(sandbox, target)).toBe(1);

      const waiterSpan = await requestSpan(recorder, 'replica-waiter');
      expect(waiterSpan.attributes['slab_proxy.cache.result']).toBe('collapsed');
      const children = await childrenOf(recorder, waiterSpan);
      expect(names(children)).toEqual(['cache lookup', 'coalesced wait']);
      const wait = byName(children, 'coalesced wait');
      expect(wait.attributes).toEqual({ 'slab_proxy.coalesce.scope': 'replicas', 'slab_proxy.coalesce.shared': true });
      expect(wait.links).toEqual([]);
    } finally {
      await first.close();
      await second.close();
      await sandbox.close();
      await recorder.runtime.shutdown();
    }
  });
});

describe('what a span never holds', () => {
  it('no token, signature, company, subject, query value or record id in any span', async () => {
    const recorder = await inMemoryTracing();
    const sandbox = await startSandbox();
    const proxy = await startProxy({ upstreamUrl: sandbox.url, tracing: recorder.runtime.tracing });
    try {
      const subject = 'canary-subject-5b1e';
      const bearer = await token({ company: 'globex', subject });
      const signature = bearer.split('.')[2] ?? '';
      const recordId = (sandbox.dataset.get('warehouses') ?? []).find((r) => String(r.company_id) === 'globex')?.id;
      expect(recordId).toBeDefined();
      const answers: RawResponse[] = [
        await get(proxy.url, `${P}/warehouses?code=canary-code-77e1`, bearer),
        await get(proxy.url, `${P}/warehouses?code=canary-code-77e1`, bearer),
        await get(proxy.url, `${P}/warehouses/${String(recordId)}`, bearer),
        await get(proxy.url, `${P}/warehouses?code=canary-code-77e1`, `${bearer.slice(0, -2)}xx`),
        await get(proxy.url, `${P}/warehouses?colour=canary-param-9c2d`, bearer),
        await send(proxy.url, `${P}/warehouses?access_token=${bearer}`),
        await send(proxy.url, `${P}/warehouses/${bearer}`, { headers: [['Authorization', `Bearer ${bearer}`]] }),
        await get(proxy.url, `${P}/warehouses`, bearer, [['tracestate', `leak=${bearer.slice(0, 200)}`]]),
      ];
      expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 401, 400, 400, 404, 200]);
      const recorded = await spans(recorder);
      expect(recorded.length).toBeGreaterThanOrEqual(answers.length);
      const text = JSON.stringify(
        recorded.map((span) => ({
          name: span.name,
          attributes: span.attributes,
          links: span.links,
          events: span.events,
          status: span.status,
          traceState: span.spanContext().traceState?.serialize(),
          resource: span.resource.attributes,
        })),
      );
      for (const secret of [bearer, signature, 'globex', subject, 'canary-code-77e1', 'canary-param-9c2d'])
        expect(text, secret).not.toContain(secret);
      expect(text).not.toContain(`/${String(recordId)}`);
      const attributeKeys = new Set(recorded.flatMap((span) => Object.keys(span.attributes)));
      for (const key of attributeKeys) expect(key).not.toMatch(/company|subject|token|user|query|url\.(full|path)/);
    } finally {
      await proxy.close();
      await sandbox.close();
      await recorder.runtime.shutdown();
    }
  });
});

describe('the OTLP export (OTEL_EXPORTER_OTLP_ENDPOINT)', () => {
  let receiver: OtlpReceiver;

  beforeAll(async () => {
    receiver = await startOtlpReceiver();
  });
  afterAll(async () => {
    await receiver.close();
  });

  it('sends the spans to <endpoint>/v1/traces as OTLP/HTTP JSON once they are flushed', async () => {
    const env = loadEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_SERVICE_NAME: 'slab-ops-proxy-test' });
    if (env.tracing === undefined) throw new Error('tracing should be on');
    const runtime = await startTracing(env.tracing);
    const sandbox = await startSandbox();
    const proxy = await startProxy({ upstreamUrl: sandbox.url, tracing: runtime.tracing });
    try {
      const res = await get(proxy.url, `${P}/receipts?per_page=2`, await token(), [
        ['traceparent', `00-${TRACE}-${PARENT}-01`],
      ]);
      expect(res.status).toBe(200);
      expect(receiver.received).toEqual([]); // batched: nothing is sent per request
      // Resolves once the collector has answered the export.
      await runtime.forceFlush();
    } finally {
      await proxy.close();
      await sandbox.close();
      await runtime.shutdown();
    }
    expect(receiver.received).toHaveLength(1);
    const request = receiver.received[0] as ReceivedExport;
    expect(request.method).toBe('POST');
    expect(request.url).toBe('/v1/traces');
    // The JavaScript OTLP/HTTP exporter speaks the JSON encoding (the protobuf one is another package).
    expect(request.contentType).toBe('application/json');
    expect(request.body.length).toBeGreaterThan(0);
    const payload = JSON.parse(request.body.toString('utf8')) as {
      resourceSpans: Array<{
        resource: { attributes: Array<{ key: string; value: { stringValue?: string } }> };
        scopeSpans: Array<{ spans: Array<{ traceId: string; parentSpanId?: string; name: string; kind: number }> }>;
      }>;
    };
    const resource = payload.resourceSpans[0]?.resource.attributes ?? [];
    expect(resource.find((a) => a.key === 'service.name')?.value.stringValue).toBe('slab-ops-proxy-test');
    const exported = payload.resourceSpans.flatMap((r) => r.scopeSpans.flatMap((s) => s.spans));
    expect(exported.map((s) => s.name).sort()).toEqual(['GET', `GET ${P}/receipts`, 'cache lookup']);
    expect(exported.every((s) => s.traceId === TRACE)).toBe(true);
    expect(exported.find((s) => s.name === `GET ${P}/receipts`)?.parentSpanId).toBe(PARENT);
  });
});
