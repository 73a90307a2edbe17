/**
 * The `pages` workload of the freshness yardstick: changes chosen by *page*, as a system of record
 * whose pages have rates of their own — 5% of the pages read change every 3 s, 20% every minute,
 * the rest never — each through one record it shows (the live sandbox's rules naming their
 * records, docs/sandbox.md#live-mode). A list page changes through its last record (one no record
 * page is read of), a record page through its own record (which its company's first list page
 * shows too). Pages are chosen by a fixed hash of their path: the same ones in every run.
 */

import type { Agent } from 'node:http';
import { API_PREFIX, RESOURCE_NAMES } from '../../src/catalog/resources.js';
import { fetchJson, type Readers, type Target } from './freshness-run.js';

const VOLATILE_SHARE = 0.05;
const MINUTE_SHARE = 0.2;
const VOLATILE_MS = 3_000;
const MINUTE_MS = 60_000;

interface LiveRule {
  readonly resource: string;
  readonly kind: 'update';
  readonly everyMs: number;
  readonly ids: number[];
}

/** FNV-1a of a page's path: where it falls in the order that chooses the changing pages. */
function rank(path: string): number {
  let hash = 0x811c9dc5;
  for (const char of path) hash = Math.imul(hash ^ (char.codePointAt(0) ?? 0), 0x01000193);
  return hash >>> 0;
}

/** The id of each company's last record on the first list page of each resource (`company/resource`). */
async function lastListedIds(agent: Agent, sandboxUrl: string, readers: Readers): Promise<Map<string, number>> {
  const ids = new Map<string, number>();
  for (const [company, token] of readers.tokens)
    for (const resource of RESOURCE_NAMES) {
      const page = await fetchJson(agent, sandboxUrl, `${API_PREFIX}/${resource}?per_page=30`, token);
      const last = (page.body as { data?: Array<{ id: number }> } | undefined)?.data?.at(-1)?.id;
      if (last !== undefined) ids.set(`${company}/${resource}`, last);
    }
  return ids;
}

function recordOf(target: Target, lastListed: ReadonlyMap<string, number>): number | undefined {
  return target.read.kind === 'record' ? target.read.id : lastListed.get(`${target.company}/${target.resource}`);
}

/** The live rules of the `pages` workload for these readers' pages (`PUT /__sandbox/live`'s `rules`). */
export async function pageWorkloadRules(agent: Agent, sandboxUrl: string, readers: Readers): Promise<LiveRule[]> {
  const lastListed = await lastListedIds(agent, sandboxUrl, readers);
  const ordered = [...readers.targets].sort((a, b) => rank(a.path) - rank(b.path));
  const volatile = Math.round(ordered.length * VOLATILE_SHARE);
  const minute = Math.round(ordered.length * MINUTE_SHARE);
  const rules = new Map<string, LiveRule>();
  ordered.slice(0, volatile + minute).forEach((target, i) => {
    const id = recordOf(target, lastListed);
    if (id === undefined) return;
    const everyMs = i < volatile ? VOLATILE_MS : MINUTE_MS;
    const key = `${target.resource} ${String(everyMs)}`;
    const rule = rules.get(key) ?? { resource: target.resource, kind: 'update' as const, everyMs, ids: [] };
    if (!rule.ids.includes(id)) rule.ids.push(id);
    rules.set(key, rule);
  });
  return [...rules.values()];
}
