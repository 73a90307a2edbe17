/**
 * The load test's freshness figures for people (bench/loadtest-freshness.ts): the same tables as
 * Markdown lines for docs/load-test.md and as a section of the HTML report — one row a run, a
 * workload's variant (answers, stale share, staleness p99, what the upstream served a minute, 200s
 * and 304s, the readers' latency of list pages and of the deep ones), staleness by the
 * replica that answered (the webhook reaches one replica; its readers are on all of them), and, in
 * the HTML, by resource.
 */
import { fmt, fmtInt, markdownTable } from './lib/format.js';
import type { GroupFreshness } from './lib/freshness-figures.js';
import { escapeHtml } from './lib/svg-chart.js';
import type { LoadtestFreshness, LoadtestFreshnessRun } from './loadtest-freshness.js';

type Table = { readonly header: readonly string[]; readonly rows: readonly (readonly string[])[] };

const share = (ratio: number): string => (Number.isFinite(ratio) ? `${fmt(ratio * 100, 1)}%` : 'n/a');
const seconds = (ms: number): string => `${fmt(ms / 1000, 1)} s`;

const VARIANT_LABELS = {
  fixed: 'fixed (TTLs alone)',
  still: 'still (nothing changing)',
} as const;

function variantLabel(run: LoadtestFreshnessRun, freshness: LoadtestFreshness): string {
  const how =
    run.variant === 'invalidated'
      ? `invalidated (webhook to ${freshness.webhookReplica})`
      : VARIANT_LABELS[run.variant];
  return `${run.workload}: ${how}`;
}

const ms = (value: number): string => (Number.isFinite(value) ? fmt(value, 1) : 'n/a');

/** What the phase did, in a sentence. */
export function freshnessIntro(freshness: LoadtestFreshness): string {
  const workloads = [...new Set(freshness.runs.map((run) => `${run.workload} (${fmtInt(run.pages)} pages)`))];
  return `Freshness: the live sandbox's workloads ${workloads.join(', ')}, ${fmtInt(freshness.perSecond)} req/s Zipf over their pages of 4 companies through the balancer to ${String(freshness.replicas)} replicas, ${String(freshness.seconds)} s a run, each from a cold cache; a stale answer misses a change older than 1 s; list latency in ms, "deep" past the first page.`;
}

function variantsTable(freshness: LoadtestFreshness): Table {
  return {
    header: [
      'run',
      'answers',
      'stale',
      'staleness p99',
      'upstream req/min',
      '200s/min',
      '304s/min',
      'list p50',
      'list p99',
      'deep p99',
    ],
    rows: freshness.runs.map((run) => [
      variantLabel(run, freshness),
      fmtInt(run.answers),
      share(run.staleShare),
      seconds(run.p99Ms),
      fmtInt(run.upstreamPerMinute),
      fmtInt(run.okPerMinute),
      fmtInt(run.notModifiedPerMinute),
      ms(run.listLatency.p50Ms),
      ms(run.listLatency.p99Ms),
      run.deepListLatency.answers > 0 ? ms(run.deepListLatency.p99Ms) : 'n/a',
    ]),
  };
}

/** One row a group (replica, resource), three columns a variant: answers, stale share, staleness p99. */
function byGroupTable(
  freshness: LoadtestFreshness,
  name: string,
  groupsOf: (run: LoadtestFreshnessRun) => Readonly<Record<string, GroupFreshness>>,
  label: (key: string) => string = (key) => key,
): Table {
  const keys = [...new Set(freshness.runs.flatMap((run) => Object.keys(groupsOf(run))))];
  return {
    header: [name, ...freshness.runs.flatMap((run) => [`${run.workload} ${run.variant}: answers`, 'stale', 'p99'])],
    rows: keys.map((key) => [
      label(key),
      ...freshness.runs.flatMap((run) => {
        const group = groupsOf(run)[key];
        return group === undefined
          ? ['0', 'n/a', 'n/a']
          : [fmtInt(group.answers), share(group.stale / group.answers), seconds(group.p99Ms)];
      }),
    ]),
  };
}

function replicasTable(freshness: LoadtestFreshness): Table {
  return byGroupTable(
    freshness,
    'replica',
    (run) => run.byReplica,
    (key) => (key === freshness.webhookReplica ? `${key} (takes the webhook)` : key),
  );
}

function webhookLine(freshness: LoadtestFreshness): string | undefined {
  const webhook = freshness.runs.find((run) => run.webhook !== undefined)?.webhook;
  return webhook === undefined
    ? undefined
    : `The webhook: ${fmtInt(webhook.delivered)} changes delivered to ${freshness.webhookReplica}, ${fmtInt(webhook.dropped)} dropped.`;
}

/** The lines for docs/load-test.md: the intro, the variants, staleness by replica. */
export function freshnessMarkdown(freshness: LoadtestFreshness): string[] {
  const variants = variantsTable(freshness);
  const replicas = replicasTable(freshness);
  const webhook = webhookLine(freshness);
  return [
    freshnessIntro(freshness),
    '',
    ...markdownTable(variants.header, variants.rows),
    '',
    ...markdownTable(replicas.header, replicas.rows),
    ...(webhook === undefined ? [] : ['', webhook]),
  ];
}

function htmlTable(id: string, table: Table): string {
  const head = `<tr>${table.header.map((h) => `<th>${escapeHtml(h)}</th>`).join('')}</tr>`;
  const rows = table.rows.map(
    (row) =>
      `<tr>${row.map((cell, i) => (i === 0 ? `<th>${escapeHtml(cell)}</th>` : `<td>${escapeHtml(cell)}</td>`)).join('')}</tr>`,
  );
  return `<table class="numbers" id="${id}">${head}\n${rows.join('\n')}</table>`;
}

/** The report's section: the variants, staleness by replica, and by resource (folded). */
export function freshnessHtml(freshness: LoadtestFreshness): string {
  const webhook = webhookLine(freshness);
  const resources = byGroupTable(freshness, 'resource', (run) => run.byResource);
  return [
    '<h2>Freshness</h2>',
    `<p class="note">${escapeHtml(freshnessIntro(freshness))}</p>`,
    htmlTable('freshness', variantsTable(freshness)),
    '<h3>By replica</h3>',
    htmlTable('freshness-replicas', replicasTable(freshness)),
    ...(webhook === undefined ? [] : [`<p class="note">${escapeHtml(webhook)}</p>`]),
    `<details><summary>By resource</summary>\n${htmlTable('freshness-resources', resources)}</details>`,
  ].join('\n');
}
