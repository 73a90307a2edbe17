/**
 * The OpenTelemetry SDK behind the proxy's spans, started only when an OTLP endpoint is configured
 * (docs/operations.md#tracing). Everything here is loaded on demand (`import()`): a proxy without tracing
 * never loads the SDK, the exporter or even the OpenTelemetry API, and its request path holds an
 * `undefined` where the tracing would be.
 *
 * The provider is the SDK's plain `TracerProvider` (@opentelemetry/sdk-trace), which reads no
 * environment variable itself: the proxy reads the ones it honours in src/config/load.ts and hands
 * their values here. Context is passed explicitly (the request's span travels with the request),
 * so no context manager (AsyncLocalStorage) runs, and no global provider is registered: nothing
 * but the proxy's own code makes spans, and tests can run several providers in one process.
 */
import { randomUUID } from 'node:crypto';
import type { Sampler, SpanProcessor } from '@opentelemetry/sdk-trace';
import { PACKAGE_VERSION } from '../platform/package.js';
import type { Tracing } from './tracing.js';

/** `OTEL_TRACES_SAMPLER` values the proxy honours (the SDK specification's built-in samplers). */
export const TRACES_SAMPLERS = [
  'always_on',
  'always_off',
  'traceidratio',
  'parentbased_always_on',
  'parentbased_always_off',
  'parentbased_traceidratio',
] as const;
export type TracesSampler = (typeof TRACES_SAMPLERS)[number];

export const DEFAULT_SERVICE_NAME = 'slab-ops-proxy';
/** The SDK specification's default: follow the caller's sampled flag, sample every new trace. */
export const DEFAULT_SAMPLER: TracesSampler = 'parentbased_always_on';

export interface TracingSettings {
  /** The OTLP/HTTP traces URL (`…/v1/traces`): spans are exported there in batches. */
  readonly endpoint: string;
  readonly serviceName: string;
  readonly sampler: TracesSampler;
  /** `OTEL_TRACES_SAMPLER_ARG`: the ratio of the `traceidratio` samplers, 0 to 1. */
  readonly samplerRatio: number;
}

export interface TracingOptions extends Omit<TracingSettings, 'endpoint'> {
  /** Omitted: no OTLP export (tests give their own processors instead). */
  readonly endpoint?: string;
  /** More span processors: a test's in-memory exporter. */
  readonly spanProcessors?: readonly SpanProcessor[];
  /** The SDK's own warnings and errors (a failed export, a collector that is down). */
  readonly onDiagnostic?: (message: string) => void;
}

export interface TracingRuntime {
  readonly tracing: Tracing;
  /** Exports every ended span now. */
  forceFlush(): Promise<void>;
  /** Exports what is left and stops; waits at most `timeoutMs` (default 3 s) for the collector. */
  shutdown(timeoutMs?: number): Promise<void>;
}

/** How long the export of one batch may take before it is abandoned (the SDK's default is 30 s). */
const EXPORT_TIMEOUT_MS = 10_000;

export async function startTracing(options: TracingOptions): Promise<TracingRuntime> {
  const [api, sdk, resources, semconv, { createTracing }] = await Promise.all([
    import('@opentelemetry/api'),
    import('@opentelemetry/sdk-trace'),
    import('@opentelemetry/resources'),
    import('@opentelemetry/semantic-conventions'),
    import('./tracing.js'),
  ]);
  if (options.onDiagnostic !== undefined) {
    const report = options.onDiagnostic;
    const log = (message: string, ...args: unknown[]): void =>
      report([message, ...args.map((arg) => (arg instanceof Error ? arg.message : String(arg)))].join(' '));
    const ignore = (): void => undefined;
    // Global to the API, as the SDK reports through it; warnings and errors only.
    api.diag.setLogger({ error: log, warn: log, info: ignore, debug: ignore, verbose: ignore }, api.DiagLogLevel.WARN);
  }

  const ratio = new sdk.TraceIdRatioBasedSampler(options.samplerRatio);
  const samplers: Record<TracesSampler, () => Sampler> = {
    always_on: () => new sdk.AlwaysOnSampler(),
    always_off: () => new sdk.AlwaysOffSampler(),
    traceidratio: () => ratio,
    parentbased_always_on: () => new sdk.ParentBasedSampler({ root: new sdk.AlwaysOnSampler() }),
    parentbased_always_off: () => new sdk.ParentBasedSampler({ root: new sdk.AlwaysOffSampler() }),
    parentbased_traceidratio: () => new sdk.ParentBasedSampler({ root: ratio }),
  };

  const processors: SpanProcessor[] = [...(options.spanProcessors ?? [])];
  if (options.endpoint !== undefined) {
    const { OTLPTraceExporter } = await import('@opentelemetry/exporter-trace-otlp-http');
    // The URL is given whole: the exporter's own reading of OTEL_EXPORTER_OTLP_*ENDPOINT is not used.
    const exporter = new OTLPTraceExporter({ url: options.endpoint });
    processors.push(new sdk.BatchSpanProcessor({ exporter, exportTimeoutMillis: EXPORT_TIMEOUT_MS }));
  }

  const provider = new sdk.TracerProvider({
    sampler: samplers[options.sampler](),
    resource: resources.defaultResource().merge(
      resources.resourceFromAttributes({
        [semconv.ATTR_SERVICE_NAME]: options.serviceName,
        [semconv.ATTR_SERVICE_VERSION]: PACKAGE_VERSION,
        // Tells the replicas apart (semantic conventions: a UUID per process).
        [semconv.ATTR_SERVICE_INSTANCE_ID]: randomUUID(),
      }),
    ),
    spanProcessors: processors,
  });
  const tracer = provider.getTracer(DEFAULT_SERVICE_NAME, PACKAGE_VERSION);

  return {
    tracing: createTracing(tracer),
    forceFlush: () => provider.forceFlush(),
    async shutdown(timeoutMs = 3_000) {
      let timer: NodeJS.Timeout | undefined;
      const bound = new Promise<void>((resolve) => {
        timer = setTimeout(resolve, timeoutMs);
        timer.unref();
      });
      await Promise.race([provider.shutdown().catch(() => undefined), bound]);
      clearTimeout(timer);
    },
  };
}
