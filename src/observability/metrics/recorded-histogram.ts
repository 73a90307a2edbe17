/**
 * A histogram of the hot path (request durations): an observation is a bucket found and two
 * additions on a series the caller keeps, off prom-client, which formats it only on a scrape.
 */
import { Histogram, type MetricType, type Registry } from 'prom-client';

/** One series of a histogram recorded off prom-client: counts per bucket (the last is +Inf), sum, count. */
export interface HistogramSeries {
  readonly labels: Record<string, string>;
  readonly buckets: Float64Array;
  sum: number;
  count: number;
}

type HistogramObject = Awaited<ReturnType<Histogram['get']>>;

/**
 * A histogram whose observations are plain additions; prom-client formats it on a scrape through
 * `get()`, the method every metric implements for its registry.
 */
export class RecordedHistogram extends Histogram {
  readonly #name: string;
  readonly #help: string;
  readonly #bounds: readonly number[];
  readonly #series = new Map<string, HistogramSeries>();

  constructor(name: string, help: string, bounds: readonly number[], registry: Registry) {
    super({ name, help, buckets: [...bounds], registers: [registry] });
    this.#name = name;
    this.#help = help;
    this.#bounds = bounds;
  }

  /** The series for a label set, created once: the hot path keeps the reference. */
  series(labels: Record<string, string>): HistogramSeries {
    const key = JSON.stringify(labels);
    let series = this.#series.get(key);
    if (series === undefined) {
      series = { labels, buckets: new Float64Array(this.#bounds.length + 1), sum: 0, count: 0 };
      this.#series.set(key, series);
    }
    return series;
  }

  record(series: HistogramSeries, value: number): void {
    const bounds = this.#bounds;
    let bucket = 0;
    while (bucket < bounds.length && value > (bounds[bucket] ?? Infinity)) bucket++;
    series.buckets[bucket] = (series.buckets[bucket] ?? 0) + 1;
    series.sum += value;
    series.count += 1;
  }

  /** What the registry formats (prom-client asks for this one first, where a metric has it). */
  getForPromString(): Promise<HistogramObject> {
    return this.get();
  }

  override get(): Promise<HistogramObject> {
    const values: HistogramObject['values'] = [];
    for (const series of this.#series.values()) {
      let cumulative = 0;
      this.#bounds.forEach((bound, index) => {
        cumulative += series.buckets[index] ?? 0;
        values.push({ metricName: `${this.#name}_bucket`, labels: { ...series.labels, le: bound }, value: cumulative });
      });
      values.push({
        metricName: `${this.#name}_bucket`,
        labels: { ...series.labels, le: '+Inf' },
        value: series.count,
      });
      values.push({ metricName: `${this.#name}_sum`, labels: series.labels, value: series.sum });
      values.push({ metricName: `${this.#name}_count`, labels: series.labels, value: series.count });
    }
    // prom-client's typings give `type` as a numeric enum; at run time (and in the text format)
    // it is the word.
    return Promise.resolve({
      name: this.#name,
      help: this.#help,
      type: 'histogram' as unknown as MetricType,
      aggregator: 'sum',
      collect: () => undefined,
      values,
    });
  }
}
