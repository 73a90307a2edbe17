/**
 * Warming: 50 distinct pages of 30 records through proxy 1, by keyset walks over every company's
 * resources (up to 3 full pages each; company 1's movements further, and by item type) taken in
 * turn, with distinct paths (the bare server and nginx serve by path). Every page must then be a
 * cache hit with the upstream's exact bytes.
 */
import { brotliDecompressSync } from 'node:zlib';
import { API_PREFIX, RESOURCE_NAMES } from '../../src/catalog/resources.js';
import { SANDBOX_COMPANIES } from '../../src/sandbox/dataset.js';
import { fmtInt, say } from '../lib/format.js';
import { get, getEncoded } from '../lib/http.js';
import type { Page } from './context.js';

const PAGE_COUNT = 50;
const PER_PAGE = 30;

interface Walk {
  readonly company: string;
  readonly resource: string;
  readonly filter: string;
  readonly limit: number;
}

function walks(): Walk[] {
  const all: Walk[] = [];
  for (const company of SANDBOX_COMPANIES.map(String)) {
    for (const resource of RESOURCE_NAMES)
      all.push({
        company,
        resource,
        filter: '',
        limit: company === '1' && resource === 'movements' ? Number.POSITIVE_INFINITY : 3,
      });
  }
  for (const itemType of ['offcut', 'remnant', 'slab'])
    all.push({ company: '1', resource: 'movements', filter: `item_type=${itemType}`, limit: 4 });
  return all;
}

export async function warmPages(
  proxyUrl: string,
  sandboxUrl: string,
  bearer: (company: string) => string,
): Promise<Page[]> {
  const groups: Page[][] = [];
  for (const walk of walks()) {
    const full: Page[] = [];
    let after: number | undefined;
    for (let step = 0; step < 50 && full.length < walk.limit; step++) {
      const query = [
        after === undefined ? '' : `after_id=${String(after)}`,
        walk.filter,
        `per_page=${String(PER_PAGE)}`,
      ]
        .filter((part) => part !== '')
        .join('&');
      const path = `${API_PREFIX}/${walk.resource}?${query}`;
      const fetched = await get(`${proxyUrl}${path}`, { authorization: bearer(walk.company) });
      if (fetched.status !== 200)
        throw new Error(
          `warming ${path} (company ${walk.company}): ${String(fetched.status)} ${fetched.body.toString('utf8').slice(0, 200)}`,
        );
      const parsed = JSON.parse(fetched.body.toString('utf8')) as {
        data: unknown[];
        meta: { has_more: boolean; next_after_id: number | null };
      };
      if (parsed.data.length === PER_PAGE)
        full.push({ company: walk.company, resource: walk.resource, path, query, body: fetched.body });
      if (!parsed.meta.has_more || parsed.meta.next_after_id === null) break;
      after = parsed.meta.next_after_id;
    }
    if (full.length > 0) groups.push(full);
  }
  // The first walk's pages, then one page of each other walk in turn.
  const pages: Page[] = [...(groups[0] ?? [])].slice(0, PAGE_COUNT);
  const paths = new Set(pages.map((p) => p.path));
  for (let depth = 0; pages.length < PAGE_COUNT; depth++) {
    let added = false;
    for (const group of groups.slice(1)) {
      const page = group[depth];
      if (page !== undefined && pages.length < PAGE_COUNT && !paths.has(page.path)) {
        pages.push(page);
        paths.add(page.path);
        added = true;
      }
    }
    if (!added && groups.every((g) => g.length <= depth)) break;
  }
  if (pages.length < PAGE_COUNT)
    throw new Error(`only ${String(pages.length)} full pages of ${String(PER_PAGE)} records found`);

  let hits = 0;
  let identical = 0;
  for (const page of pages) {
    const again = await get(`${proxyUrl}${page.path}`, { authorization: bearer(page.company) });
    if (
      again.status === 200 &&
      (again.headers.get('cache-status') ?? '').includes('hit') &&
      again.body.equals(page.body)
    )
      hits += 1;
    const direct = await get(`${sandboxUrl}${page.path}`, { authorization: bearer(page.company) });
    if (direct.status === 200 && direct.body.equals(page.body)) identical += 1;
  }
  const rawBytes = pages.reduce((sum, p) => sum + p.body.length, 0) / pages.length;
  const companies = [...new Set(pages.map((p) => p.company))].join(', ');
  const resources = new Set(pages.map((p) => p.resource)).size;
  say(
    `pages: ${String(pages.length)} distinct pages of ${String(PER_PAGE)} records (companies ${companies}; ${String(resources)} resources), ${fmtInt(rawBytes)} bytes of JSON on average`,
  );
  say(
    `  cache hits on a second read: ${String(hits)}/${String(pages.length)}; proxy bytes identical to the upstream's: ${String(identical)}/${String(pages.length)}`,
  );
  if (hits !== pages.length) throw new Error('the warmed pages are not all cache hits');
  return pages;
}

/** Mean body bytes of the pages as identity and as `br`: what a `br` hit saves on the wire. */
export interface BodyBytes {
  readonly identity: number;
  readonly br: number;
}

/**
 * Each page once more with `Accept-Encoding: br`: the stored brotli bytes must come as they are
 * (`Content-Encoding: br`) and decode to the identity body; their mean size is the `br` verdict's
 * body figure (docs/clients.md#content-coding).
 */
export async function brBodies(
  proxyUrl: string,
  pages: readonly Page[],
  bearer: (company: string) => string,
): Promise<BodyBytes> {
  let identity = 0;
  let br = 0;
  for (const page of pages) {
    const coded = await getEncoded(`${proxyUrl}${page.path}`, {
      authorization: bearer(page.company),
      'accept-encoding': 'br',
    });
    if (coded.status !== 200 || coded.contentEncoding !== 'br')
      throw new Error(`${page.path}: no br answer (${String(coded.status)})`);
    if (!brotliDecompressSync(coded.body).equals(page.body))
      throw new Error(`${page.path}: the br body does not decode to the identity body`);
    identity += page.body.length;
    br += coded.body.length;
  }
  const bodies = { identity: identity / pages.length, br: br / pages.length };
  say(
    `  as br: ${fmtInt(bodies.br)} bytes on average (${(bodies.br / bodies.identity).toFixed(3)}× the JSON), each decoding to the identity bytes`,
  );
  return bodies;
}
