/**
 * A strict reader of the Prometheus text exposition format (version 0.0.4): every line must be a
 * `# HELP`, a `# TYPE`, a blank line or a sample of a declared family, or the read fails. Returns
 * each sample's value by its series (`name{label="value",...}`, labels sorted).
 */
export interface Exposition {
  readonly types: ReadonlyMap<string, string>;
  readonly samples: ReadonlyMap<string, number>;
  /** The value of one series, 0 when absent. */
  value(name: string, labels?: Record<string, string>): number;
  /** All series of a sample name, with their labels. */
  series(name: string): { labels: Record<string, string>; value: number }[];
}

const NAME = '[a-zA-Z_:][a-zA-Z0-9_:]*';
const HELP = new RegExp(`^# HELP (${NAME}) (.*)$`);
const TYPE = new RegExp(`^# TYPE (${NAME}) (counter|gauge|histogram|summary|untyped)$`);
const SAMPLE = new RegExp(`^(${NAME})(?:\\{(.*)\\})? (\\S+)(?: (-?\\d+))?$`);
const LABEL = /^([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\["\\n])*)"(?:,|$)/;
const VALUE = /^(?:[+-]?(?:\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)|[+-]?[Ii]nf|[Nn]a[Nn])$/;

function key(name: string, labels: Record<string, string>): string {
  const parts = Object.keys(labels)
    .sort()
    .map((label) => `${label}="${labels[label] ?? ''}"`);
  return parts.length === 0 ? name : `${name}{${parts.join(',')}}`;
}

function parseLabels(text: string, line: string): Record<string, string> {
  const labels: Record<string, string> = {};
  let rest = text;
  while (rest !== '') {
    const match = LABEL.exec(rest);
    if (match === null) throw new Error(`bad labels in: ${line}`);
    const [whole, label = '', value = ''] = match;
    if (label in labels) throw new Error(`duplicate label ${label} in: ${line}`);
    labels[label] = value.replace(/\\n/g, '\n').replace(/\\"/g, '"').replace(/\\\\/g, '\\');
    rest = rest.slice(whole.length);
  }
  return labels;
}

/** The family a sample belongs to: histograms and summaries add suffixes. */
function familyOf(name: string, types: ReadonlyMap<string, string>): string | undefined {
  if (types.has(name)) return name;
  for (const suffix of ['_bucket', '_sum', '_count']) {
    if (name.endsWith(suffix)) {
      const base = name.slice(0, -suffix.length);
      const type = types.get(base);
      if (type === 'histogram' || (type === 'summary' && suffix !== '_bucket')) return base;
    }
  }
  return undefined;
}

export function parseExposition(text: string): Exposition {
  const types = new Map<string, string>();
  const samples = new Map<string, number>();
  const byName = new Map<string, { labels: Record<string, string>; value: number }[]>();
  for (const line of text.split('\n')) {
    if (line === '') continue;
    if (line.startsWith('#')) {
      const type = TYPE.exec(line);
      if (type !== null) {
        const [, name = '', kind = ''] = type;
        if (types.has(name)) throw new Error(`TYPE given twice for ${name}`);
        types.set(name, kind);
        continue;
      }
      if (HELP.test(line)) continue;
      throw new Error(`bad comment line: ${line}`);
    }
    const sample = SAMPLE.exec(line);
    if (sample === null) throw new Error(`bad sample line: ${line}`);
    const [, name = '', labelText = '', valueText = ''] = sample;
    if (familyOf(name, types) === undefined) throw new Error(`sample of an undeclared family: ${line}`);
    if (!VALUE.test(valueText)) throw new Error(`bad value in: ${line}`);
    const labels = parseLabels(labelText, line);
    const series = key(name, labels);
    if (samples.has(series)) throw new Error(`series given twice: ${series}`);
    const value = /nan/i.test(valueText) ? Number.NaN : Number(valueText.replace(/inf/i, 'Infinity'));
    samples.set(series, value);
    const list = byName.get(name) ?? [];
    list.push({ labels, value });
    byName.set(name, list);
  }
  return {
    types,
    samples,
    value: (name, labels = {}) => samples.get(key(name, labels)) ?? 0,
    series: (name) => byName.get(name) ?? [],
  };
}
