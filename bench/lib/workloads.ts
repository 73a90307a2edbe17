/**
 * The freshness yardstick's workloads (docs/benchmarks.md#freshness): what the live sandbox changes
 * and which pages the readers read.
 *
 * - `mixed`: the sandbox's preset (docs/sandbox.md#live-mode), read on each company's first list
 *   page of every resource and its first three records;
 * - `pages`: the same pages, 5% of them changing every 3 s and 20% every minute
 *   (bench/lib/page-workload.ts);
 * - `append`: the sandbox's preset (a new movement every 300 ms in each company), read on every
 *   page of each company's movements, unfiltered and filtered by `item_type`, 10 a page — deep
 *   pages included;
 * - `move`: the sandbox's preset (5% of the movements change `item_type` every 10 s), read on the
 *   same pages as `append`.
 */
import type { Agent } from 'node:http';
import { API_PREFIX } from '../../src/catalog/resources.js';
import { TEXT_VALUES } from '../../src/sandbox/dataset.js';
import { fetchJson, firstPageTargets, type Readers, readerTokens, type Target } from './freshness-run.js';
import { pageWorkloadRules } from './page-workload.js';

export const FRESHNESS_WORKLOADS = ['mixed', 'pages', 'append', 'move'] as const;
export type FreshnessWorkload = (typeof FRESHNESS_WORKLOADS)[number];

export function isFreshnessWorkload(name: unknown): name is FreshnessWorkload {
  return FRESHNESS_WORKLOADS.some((known) => known === name);
}

/** The pages a workload reads: first pages and records (`mixed`, `pages`), or the log's every page. */
export function pagesReadBy(workload: FreshnessWorkload): 'first-pages' | 'log-pages' {
  return workload === 'append' || workload === 'move' ? 'log-pages' : 'first-pages';
}

/** What a workload reads, and the body of `PUT /__sandbox/live` that makes its changes. */
export interface PreparedWorkload {
  readonly readers: Readers;
  readonly live: { readonly preset: string } | { readonly rules: readonly unknown[] };
}

const LOG = 'movements';
const LOG_FILTER = 'item_type';
const LOG_PER_PAGE = 10;

/** Every page of one list, walked by `next_after_id` from the start (seed §4), as targets. */
async function walkList(
  agent: Agent,
  sandboxUrl: string,
  company: string,
  token: string,
  filters: ReadonlyArray<readonly [string, string]>,
): Promise<Target[]> {
  const targets: Target[] = [];
  const query = filters.map(([name, value]) => `${name}=${encodeURIComponent(value)}&`).join('');
  for (let afterId = 0, more = true; more; ) {
    const path = `${API_PREFIX}/${LOG}?${query}per_page=${String(LOG_PER_PAGE)}${afterId > 0 ? `&after_id=${String(afterId)}` : ''}`;
    targets.push({ company, resource: LOG, path, read: { kind: 'list', filters, afterId } });
    const page = (await fetchJson(agent, sandboxUrl, path, token)).body as
      | { meta?: { has_more?: boolean; next_after_id?: number } }
      | undefined;
    const next = page?.meta?.next_after_id;
    more = page?.meta?.has_more === true && typeof next === 'number' && next > afterId;
    if (typeof next === 'number') afterId = next;
  }
  return targets;
}

/** Each company's movements, every page: unfiltered, and by each `item_type`. */
async function logPageTargets(
  agent: Agent,
  sandboxUrl: string,
  tokens: ReadonlyMap<string, string>,
): Promise<Target[]> {
  const filterSets: ReadonlyArray<ReadonlyArray<readonly [string, string]>> = [
    [],
    ...(TEXT_VALUES[`${LOG}.${LOG_FILTER}`] ?? []).map((value) => [[LOG_FILTER, value] as const]),
  ];
  const targets: Target[] = [];
  for (const [company, token] of tokens)
    for (const filters of filterSets) targets.push(...(await walkList(agent, sandboxUrl, company, token, filters)));
  return targets;
}

/** Every record page of these resources in every company, their ids walked from the lists, 100 a page. */
export async function recordTargets(
  agent: Agent,
  sandboxUrl: string,
  tokens: ReadonlyMap<string, string>,
  resources: readonly string[],
): Promise<Target[]> {
  const targets: Target[] = [];
  for (const [company, token] of tokens)
    for (const resource of resources)
      for (let afterId = 0, more = true; more; ) {
        const path = `${API_PREFIX}/${resource}?per_page=100${afterId > 0 ? `&after_id=${String(afterId)}` : ''}`;
        const page = (await fetchJson(agent, sandboxUrl, path, token)).body as
          | { data?: Array<{ id: number }>; meta?: { has_more?: boolean; next_after_id?: number } }
          | undefined;
        for (const { id } of page?.data ?? [])
          targets.push({
            company,
            resource,
            path: `${API_PREFIX}/${resource}/${String(id)}`,
            read: { kind: 'record', id },
          });
        const next = page?.meta?.next_after_id;
        more = page?.meta?.has_more === true && typeof next === 'number' && next > afterId;
        if (typeof next === 'number') afterId = next;
      }
  return targets;
}

/** The readers and changes of a workload, on a sandbox whose dataset is as it started. */
export async function prepareWorkload(
  workload: FreshnessWorkload,
  agent: Agent,
  sandboxUrl: string,
  secret: string,
): Promise<PreparedWorkload> {
  const tokens = await readerTokens(secret);
  if (pagesReadBy(workload) === 'log-pages')
    return {
      readers: { targets: await logPageTargets(agent, sandboxUrl, tokens), tokens },
      live: { preset: workload },
    };
  const readers = { targets: await firstPageTargets(agent, sandboxUrl, tokens), tokens };
  return {
    readers,
    live: workload === 'mixed' ? { preset: 'mixed' } : { rules: await pageWorkloadRules(agent, sandboxUrl, readers) },
  };
}
