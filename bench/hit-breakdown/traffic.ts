/**
 * What the hit breakdown sends: the pages (by default company 1's movements, walked by keyset as
 * the sandbox answers them), a token for each company, each request made as node's parser hands
 * it over (a real `IncomingMessage`, its response a real `ServerResponse`, over a socket never
 * connected; node:http builds the header objects lazily, where they are first read, as in the
 * server), opened as the data plane opens it; and each page's entry as a fill stores it.
 */
import { type IncomingMessage, ServerResponse } from 'node:http';
import { Socket } from 'node:net';
import { brotliBody, type CacheEntry, strongEtag } from '../../src/cache/entry/entry.js';
import { API_PREFIX } from '../../src/catalog/resources.js';
import { mintDevToken } from '../../src/cli/dev-credentials.js';
import { openExchange } from '../../src/planes/data/data-plane.js';
import type { Exchange } from '../../src/planes/data/exchange.js';
import type { Step } from '../../src/planes/data/steps.js';
import { generateDataset } from '../../src/sandbox/dataset.js';
import { makeRequest } from '../lib/parsed-request.js';
import { cycle } from './measure.js';
import type { Rig } from './rig.js';

export interface BreakdownPage {
  /** Path and query as a client sends it (under the API prefix). */
  readonly path: string;
  /** The page's bytes as the upstream sent them. */
  readonly body: Buffer;
  readonly company: string;
}

/** A request flow: named steps in their order (`REQUEST_FLOW`'s shape). */
export type Flow = ReadonlyArray<readonly [name: string, step: Step]>;

/** A request as node's parser hands it over, and its response: made untimed. */
export interface Fresh {
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
}

/** The pages' requests, each with its company's token, as fresh objects and as exchanges. */
export interface Traffic {
  readonly tokens: readonly string[];
  /** The next page's request and response (the pages in turn), with its company's token or `token`. */
  fresh(token?: string): Fresh;
  open(fresh: Fresh): Exchange;
  /**
   * The next page's exchange, taken through `steps`, none of which may answer it; with `newToken`,
   * its company's token is one minted for it, never seen before.
   */
  through(steps: Flow, newToken?: boolean): Promise<Exchange>;
  close(): void;
}

/** Company 1's movements, by keyset, 30 records a page, as the sandbox would answer them. */
export function defaultPages(): BreakdownPage[] {
  const records = (generateDataset().get('movements') ?? []).filter((r) => String(r.company_id) === '1');
  const pages: BreakdownPage[] = [];
  for (let start = 0; start + 30 <= records.length; start += 30) {
    const page = records.slice(start, start + 30);
    const hasMore = start + 30 < records.length;
    const last = page[page.length - 1];
    const body = {
      data: page,
      meta: { per_page: 30, has_more: hasMore, next_after_id: hasMore && last !== undefined ? last.id : null },
    };
    const after = start === 0 ? undefined : records[start - 1]?.id;
    pages.push({
      path: `${API_PREFIX}/movements?${after === undefined ? '' : `after_id=${after}&`}per_page=30`,
      body: Buffer.from(JSON.stringify(body)),
      company: '1',
    });
  }
  return pages;
}

/** A token for `company`, signed with `secret`; each one minted is a token never seen before. */
function tokenFor(company: string, secret: string): Promise<string> {
  const claim = /^[1-9][0-9]*$/.test(company) ? Number(company) : company;
  return mintDevToken({ company: claim, secret });
}

/** A token for each company of the pages, signed with the secret the verifier is given. */
async function tokensFor(pages: readonly BreakdownPage[], secret: string): Promise<ReadonlyMap<string, string>> {
  const tokenOf = new Map<string, string>();
  for (const company of new Set(pages.map((p) => p.company))) tokenOf.set(company, await tokenFor(company, secret));
  return tokenOf;
}

/** An entry as a fill makes it (its brotli body made once, then), fresh for the whole run. */
export function filledEntry(body: Buffer, storedAt: number, generation: string): CacheEntry {
  const etag = strongEtag(body);
  return {
    status: 200,
    contentType: 'application/json',
    etag,
    body,
    brotli: brotliBody(body, etag),
    storedAt,
    freshUntil: storedAt + 3_600_000,
    keepUntil: storedAt + 3_700_000,
    generation,
  };
}

export async function trafficOf(
  pages: readonly BreakdownPage[],
  secret: string,
  { planeOptions, parts, answers }: Pick<Rig, 'planeOptions' | 'parts' | 'answers'>,
): Promise<Traffic> {
  const tokenOf = await tokensFor(pages, secret);
  const requests = pages.map((page) => ({
    url: page.path,
    company: page.company,
    token: tokenOf.get(page.company) ?? '',
  }));
  const socket = new Socket();
  let served = 0;
  const traffic: Traffic = {
    tokens: requests.map((r) => r.token),
    fresh(token) {
      const request = cycle(requests, served++);
      const rawHeaders = ['Host', '127.0.0.1:8080', 'Authorization', `Bearer ${token ?? request.token}`];
      const req = makeRequest(socket, request.url, rawHeaders);
      return { req, res: new ServerResponse(req) };
    },
    open({ req, res }) {
      const ex = openExchange(req, res, planeOptions.yieldUnknownResources, planeOptions.tracing);
      if (ex === undefined) throw new Error(`hit-breakdown: ${String(req.url)} is not the data plane's`);
      return ex;
    },
    async through(steps, newToken = false) {
      const token = newToken ? await tokenFor(cycle(requests, served).company, secret) : undefined;
      const ex = traffic.open(traffic.fresh(token));
      for (const [name, step] of steps) {
        if (await step(ex, parts)) {
          answers.expectOnlyHits(`step "${name}"`);
          throw new Error(`hit-breakdown: step "${name}" answered a hit before the last step of its path`);
        }
      }
      return ex;
    },
    close: () => socket.destroy(),
  };
  return traffic;
}
