/**
 * The one owner of the app's metrics registry: every metric is made through it from its definition
 * (definitions.ts), registered there, and rendered on a scrape after the process's own metrics.
 */
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import type { CounterDefinition, GaugeDefinition, GaugeReading, HistogramDefinition } from './definitions.js';
import { RecordedHistogram } from './recorded-histogram.js';

/** Process metrics (heap, event loop lag, GC, handles): one collector per process, not per app. */
let processRegistry: Registry | undefined;
function sharedProcessRegistry(): Registry {
  if (processRegistry === undefined) {
    processRegistry = new Registry();
    // Their standard names (`process_*`, `nodejs_*`), unprefixed: stock Node.js dashboards and
    // alerts work as they are.
    collectDefaultMetrics({ register: processRegistry });
  }
  return processRegistry;
}

export class MetricRegistry {
  readonly #registry = new Registry();
  readonly #includeProcess: boolean;

  /** `includeProcess`: Node's process metrics too (the tests' many apps in one process share them). */
  constructor(includeProcess: boolean) {
    this.#includeProcess = includeProcess;
    // Started now, not at the first scrape: the event-loop delay and GC collectors measure from
    // the moment they exist.
    if (includeProcess) sharedProcessRegistry();
  }

  /** A counter with its zero series; `collect` runs on each scrape, before the counter is read. */
  counter<L extends string>(definition: CounterDefinition<L>, collect?: (counter: Counter<L>) => void): Counter<L> {
    const counter = new Counter<L>({
      name: definition.name,
      help: definition.help,
      labelNames: definition.labelNames,
      registers: [this.#registry],
      ...(collect !== undefined && {
        collect(this: Counter<L>) {
          collect(this);
        },
      }),
    });
    for (const labels of definition.zeroes ?? []) counter.labels(...labels).inc(0);
    return counter;
  }

  histogram<L extends string>(definition: HistogramDefinition<L>): Histogram<L> {
    return new Histogram<L>({
      name: definition.name,
      help: definition.help,
      labelNames: definition.labelNames ?? [],
      buckets: [...definition.buckets],
      registers: [this.#registry],
    });
  }

  /** A histogram of the hot path, without labels of its own: its series carry them. */
  recordedHistogram(definition: HistogramDefinition<never>): RecordedHistogram {
    return new RecordedHistogram(definition.name, definition.help, definition.buckets, this.#registry);
  }

  /** A gauge set from `read` at each scrape. */
  gauge(definition: GaugeDefinition, read: () => GaugeReading): void {
    new Gauge({
      name: definition.name,
      help: definition.help,
      labelNames: definition.labelNames ?? [],
      registers: [this.#registry],
      collect() {
        const reading = read();
        if (typeof reading === 'number') return void this.set(reading);
        // A label set absent from this reading is gone (a company no longer among the top).
        this.reset();
        for (const [labels, value] of reading) this.labels(...labels).set(value);
      },
    });
  }

  /** Prometheus text for a scrape. */
  async render(): Promise<string> {
    const own = await this.#registry.metrics();
    return this.#includeProcess ? `${await sharedProcessRegistry().metrics()}\n${own}` : own;
  }
}
