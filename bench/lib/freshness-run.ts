/**
 * Reading for the freshness yardstick (the bench's freshness phase, bench/phases/freshness.ts, and
 * the load test's, bench/loadtest-freshness.ts): the pages read, the readers' tokens, an open-loop
 * reader that picks pages by Zipf, and the live sandbox's change log to judge the answers by
 * (bench/lib/freshness.ts).
 */
import { type Agent, request } from 'node:http';
import { API_PREFIX, RESOURCE_NAMES } from '../../src/catalog/resources.js';
import { mintDevToken } from '../../src/cli/dev-credentials.js';
import { SANDBOX_COMPANIES } from '../../src/sandbox/dataset.js';
import { type Answered, ChangeFeed, type LoggedChange } from './freshness.js';
import { sandboxControl } from './http.js';
import { zipfPicker } from './zipf.js';

/** A page a reader asks for: its target and what it reads. */
export interface Target {
  readonly company: string;
  readonly resource: string;
  readonly path: string;
  readonly read: Answered['read'];
}

/**
 * An answer to a target's request, with the proxy's `Cache-Status` for it (which path served a
 * stale one), its `X-Request-Id` (which replica answered) and the ms from its request sent to its
 * body read.
 */
export type Judged = Answered & {
  readonly path: string;
  readonly cacheStatus: string;
  readonly requestId: string;
  readonly latencyMs: number;
};

/** The pages read and a bearer token for each company. */
export interface Readers {
  readonly targets: readonly Target[];
  readonly tokens: ReadonlyMap<string, string>;
}

export interface ReadPace {
  readonly seconds: number;
  readonly perSecond: number;
}

interface JsonAnswer {
  readonly status: number;
  readonly body: unknown;
  readonly cacheStatus: string;
  readonly requestId: string;
}

const header = (value: string | string[] | undefined): string => (typeof value === 'string' ? value : '');

/** One GET, its body parsed as JSON (`undefined` when it is not); status 0 when the request failed. */
export function fetchJson(agent: Agent, base: string, path: string, authorization: string): Promise<JsonAnswer> {
  return new Promise((resolve) => {
    const sent = request(new URL(path, base), { agent, headers: { authorization } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => {
        let body: unknown;
        try {
          body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
        } catch {
          body = undefined;
        }
        resolve({
          status: res.statusCode ?? 0,
          body,
          cacheStatus: header(res.headers['cache-status']),
          requestId: header(res.headers['x-request-id']),
        });
      });
    });
    sent.on('error', () => resolve({ status: 0, body: undefined, cacheStatus: '', requestId: '' }));
    sent.end();
  });
}

/** Each company's first list page of each resource, and its first three records by id. */
function targetsOf(companies: readonly string[], firstIds: ReadonlyMap<string, readonly number[]>): Target[] {
  return companies.flatMap((company) =>
    RESOURCE_NAMES.flatMap((resource) => [
      {
        company,
        resource,
        path: `${API_PREFIX}/${resource}?per_page=30`,
        read: { kind: 'list', filters: [], afterId: 0 },
      } as Target,
      ...(firstIds.get(`${company}/${resource}`) ?? []).map(
        (id): Target => ({
          company,
          resource,
          path: `${API_PREFIX}/${resource}/${String(id)}`,
          read: { kind: 'record', id },
        }),
      ),
    ]),
  );
}

/** A bearer token for each sandbox company. */
export async function readerTokens(secret: string): Promise<Map<string, string>> {
  const tokens = new Map<string, string>();
  for (const company of SANDBOX_COMPANIES.map(String))
    tokens.set(company, `Bearer ${await mintDevToken({ company, secret })}`);
  return tokens;
}

/** Each company's first list page of each resource and its first three records, asked of the sandbox itself. */
export async function firstPageTargets(
  agent: Agent,
  sandboxUrl: string,
  tokens: ReadonlyMap<string, string>,
): Promise<Target[]> {
  const firstIds = new Map<string, number[]>();
  for (const [company, token] of tokens)
    for (const resource of RESOURCE_NAMES) {
      const page = await fetchJson(agent, sandboxUrl, `${API_PREFIX}/${resource}?per_page=3`, token);
      const data = (page.body as { data?: Array<{ id: number }> } | undefined)?.data ?? [];
      firstIds.set(
        `${company}/${resource}`,
        data.map((record) => record.id),
      );
    }
  return targetsOf([...tokens.keys()], firstIds);
}

/** Every sandbox company's token, and its first pages (firstPageTargets). */
export async function prepareReaders(agent: Agent, sandboxUrl: string, secret: string): Promise<Readers> {
  const tokens = await readerTokens(secret);
  return { targets: await firstPageTargets(agent, sandboxUrl, tokens), tokens };
}

/**
 * `perSecond` requests a second for `seconds`, open loop, each a Zipf pick of the targets; the
 * k-th request goes on `agents[k % agents.length]` (one agent: its pool of connections; several
 * agents of one connection each, behind a balancer: the requests spread evenly over its backends).
 * Answers other than 200 are not judged.
 */
export async function readOpenLoop(
  agents: readonly Agent[],
  base: string,
  readers: Readers,
  pace: ReadPace,
): Promise<Judged[]> {
  const { targets, tokens } = readers;
  const pick = zipfPicker(targets.length);
  // The most read pages spread over the companies and resources: a fixed shuffle of the targets.
  const order = targets
    .map((target, i) => ({ target, key: (i * 2_654_435_761) % 4_294_967_296 }))
    .sort((a, b) => a.key - b.key);
  const answers: Judged[] = [];
  const pending: Promise<void>[] = [];
  const tickMs = 10;
  const end = performance.now() + pace.seconds * 1000;
  let owed = 0;
  let sent = 0;
  while (performance.now() < end) {
    owed += (pace.perSecond * tickMs) / 1000;
    for (; owed >= 1; owed -= 1) {
      const target = order[pick()]?.target;
      const agent = agents[sent++ % agents.length];
      if (target === undefined || agent === undefined) continue;
      const sentAt = performance.now();
      pending.push(
        fetchJson(agent, base, target.path, tokens.get(target.company) ?? '').then((answer) => {
          if (answer.status === 200)
            answers.push({
              ...target,
              servedAt: Date.now(),
              latencyMs: performance.now() - sentAt,
              body: answer.body,
              cacheStatus: answer.cacheStatus,
              requestId: answer.requestId,
            });
        }),
      );
    }
    await new Promise((resolve) => setTimeout(resolve, tickMs));
  }
  await Promise.all(pending);
  return answers;
}

/** The sandbox's change log, read whole so far (`GET /__sandbox/changes`). */
export async function sandboxFeed(sandboxUrl: string): Promise<ChangeFeed> {
  const feed = new ChangeFeed(async (since) => {
    const listed = await sandboxControl(sandboxUrl, 'GET', `changes?since=${String(since)}&limit=1000000`);
    return (listed as { changes: LoggedChange[] }).changes;
  });
  await feed.update();
  return feed;
}

/** What the sandbox's webhook did with the changes of its live run (`GET /__sandbox/live`). */
export async function webhookCounts(sandboxUrl: string): Promise<{ delivered: number; dropped: number }> {
  const live = (await sandboxControl(sandboxUrl, 'GET', 'live')) as {
    webhook?: { delivered?: number; dropped?: number };
  };
  return { delivered: live.webhook?.delivered ?? 0, dropped: live.webhook?.dropped ?? 0 };
}
