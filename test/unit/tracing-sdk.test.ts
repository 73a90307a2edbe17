/**
 * The tracing runtime as the start builds it (src/observability/tracing-sdk.ts): each
 * OTEL_TRACES_SAMPLER value decides as the SDK specification says, the resource names the service,
 * and a request span is named and attributed by the HTTP semantic conventions.
 */
import { InMemorySpanExporter, type ReadableSpan, SimpleSpanProcessor } from '@opentelemetry/sdk-trace';
import { describe, expect, it } from 'vitest';
import { startTracing, TRACES_SAMPLERS, type TracesSampler } from '../../src/observability/tracing-sdk.js';

const SAMPLED_PARENT = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
const UNSAMPLED_PARENT = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00';

async function recorded(
  sampler: TracesSampler,
  ratio: number,
  requests: ReadonlyArray<{ method?: string; route?: string; traceparent?: string }>,
): Promise<ReadableSpan[]> {
  const exporter = new InMemorySpanExporter();
  const runtime = await startTracing({
    serviceName: 'svc-under-test',
    sampler,
    samplerRatio: ratio,
    spanProcessors: [new SimpleSpanProcessor({ exporter })],
  });
  for (const request of requests) {
    runtime.tracing
      .startRequest({
        method: request.method ?? 'GET',
        route: request.route,
        resource: undefined,
        requestId: 'r',
        traceparent: request.traceparent,
        tracestate: undefined,
      })
      .end(200, undefined, undefined);
  }
  await runtime.forceFlush();
  const spans = exporter.getFinishedSpans();
  await runtime.shutdown();
  return spans;
}

describe('OTEL_TRACES_SAMPLER', () => {
  const cases: ReadonlyArray<readonly [TracesSampler, number, readonly [boolean, boolean, boolean]]> = [
    // [sampler, ratio, recorded for: a new trace, a sampled parent, an unsampled parent]
    ['always_on', 1, [true, true, true]],
    ['always_off', 1, [false, false, false]],
    ['traceidratio', 1, [true, true, true]],
    ['traceidratio', 0, [false, false, false]],
    ['parentbased_always_on', 1, [true, true, false]],
    ['parentbased_always_off', 1, [false, true, false]],
    ['parentbased_traceidratio', 0, [false, true, false]],
    ['parentbased_traceidratio', 1, [true, true, false]],
  ];

  it('covers every sampler the start accepts', () => {
    expect(new Set(cases.map(([sampler]) => sampler))).toEqual(new Set(TRACES_SAMPLERS));
  });

  it.each(cases)(
    '%s (ratio %s) records a new trace, a sampled and an unsampled parent: %j',
    async (sampler, ratio, expected) => {
      const results = await Promise.all(
        [undefined, SAMPLED_PARENT, UNSAMPLED_PARENT].map(
          async (traceparent) =>
            (await recorded(sampler, ratio, [{ route: '/r', ...(traceparent !== undefined && { traceparent }) }]))
              .length === 1,
        ),
      );
      expect(results).toEqual(expected);
    },
  );
});

describe('the request span', () => {
  it('names the service, and names the span by the method and the route', async () => {
    const [span] = await recorded('always_on', 1, [{ method: 'HEAD', route: '/api/slab/v1/operations/x/{id}' }]);
    expect(span?.name).toBe('HEAD /api/slab/v1/operations/x/{id}');
    expect(span?.resource.attributes['service.name']).toBe('svc-under-test');
    expect(span?.resource.attributes['service.instance.id']).toMatch(/^[0-9a-f-]{36}$/);
    expect(span?.instrumentationScope.name).toBe('slab-ops-proxy');
  });

  it('without a route, the method alone; a method outside the known set as _OTHER', async () => {
    const spans = await recorded('always_on', 1, [{ method: 'GET' }, { method: 'PROPFIND' }]);
    expect(spans.map((s) => s.name)).toEqual(['GET', '_OTHER']);
    expect(spans[1]?.attributes).toMatchObject({
      'http.request.method': '_OTHER',
      'http.request.method_original': 'PROPFIND',
    });
    expect(spans[0]?.attributes['http.route']).toBeUndefined();
  });
});
