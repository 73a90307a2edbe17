/**
 * The variants measured, each a data plane and the headers its requests carry: tracing off (and
 * off again, the method's own noise), another build's plane with TRACING_COST_BASELINE, the client
 * sending `traceparent`, tracing on and not sampled, on and sampled (spans batched to an exporter
 * that discards them), and sampled with the client's `traceparent`.
 */
import type { ReadableSpan, SpanExporter } from '@opentelemetry/sdk-trace';
import { startTracing, type TracesSampler } from '../../../src/observability/tracing-sdk.js';
import type { DataPlane } from '../../../src/planes/data/data-plane.js';
import type { HitPlanes } from './hit-planes.js';

const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const PARENT = '00f067aa0ba902b7';

/** An exporter that counts and drops: the SDK's work without the network's. */
class DiscardingExporter implements SpanExporter {
  exported = 0;
  export(spans: ReadableSpan[], done: Parameters<SpanExporter['export']>[1]): void {
    this.exported += spans.length;
    done({ code: 0 });
  }
  shutdown(): Promise<void> {
    return Promise.resolve();
  }
}

export interface Variant {
  readonly name: string;
  readonly plane: DataPlane;
  /** Raw header pairs, as Node's parser hands them over. */
  readonly headers: readonly string[];
  readonly exporter: DiscardingExporter | undefined;
  readonly shutdown: () => Promise<void>;
  requests: number;
  /** Each round's mean µs per hit. */
  readonly means: number[];
}

function variant(
  name: string,
  plane: DataPlane,
  headers: readonly string[],
  traced?: { exporter: DiscardingExporter; shutdown: () => Promise<void> },
): Variant {
  return {
    name,
    plane,
    headers,
    exporter: traced?.exporter,
    shutdown: traced?.shutdown ?? (() => Promise.resolve()),
    requests: 0,
    means: [],
  };
}

/** A data plane of this build with tracing started: `sampler`, batched to a discarding exporter. */
async function traced(
  current: HitPlanes,
  name: string,
  sampler: TracesSampler,
  headers: readonly string[],
): Promise<Variant> {
  const exporter = new DiscardingExporter();
  const sdk = await import('@opentelemetry/sdk-trace');
  const runtime = await startTracing({
    serviceName: 'slab-ops-proxy',
    sampler,
    samplerRatio: 1,
    spanProcessors: [new sdk.BatchSpanProcessor({ exporter })],
  });
  return variant(name, current.planeWith(runtime.tracing), headers, {
    exporter,
    shutdown: () => runtime.shutdown(),
  });
}

/** Every variant, `off` first and `off, again` second (the report's yardstick and its noise). */
export async function tracingVariants(
  current: HitPlanes,
  baseline: HitPlanes | undefined,
  bearer: string,
): Promise<Variant[]> {
  const plain = ['Host', '127.0.0.1:8080', 'Authorization', `Bearer ${bearer}`];
  const withParent = [...plain, 'traceparent', `00-${TRACE}-${PARENT}-01`, 'tracestate', 'rojo=00f067aa0ba902b7'];
  return [
    variant('off', current.planeWith(undefined), plain),
    variant('off, again (the noise)', current.planeWith(undefined), plain),
    ...(baseline === undefined
      ? []
      : [variant('before tracing (TRACING_COST_BASELINE)', baseline.planeWith(undefined), plain)]),
    variant('off, client traceparent', current.planeWith(undefined), withParent),
    await traced(current, 'on, not sampled', 'always_off', plain),
    await traced(current, 'on, sampled', 'parentbased_always_on', plain),
    await traced(current, 'on, sampled, client traceparent', 'parentbased_always_on', withParent),
  ];
}
