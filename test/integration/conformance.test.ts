/**
 * Conformance: the proxy is a drop-in for the system of record (docs/clients.md). The same request target
 * is sent to the sandbox directly and through the proxy; status, content type and body must be
 * byte-identical. The proxy canonicalises before forwarding, the sandbox reads the raw query as an
 * ordinary server does, so each comparison checks two independent readings of one request.
 *
 * The sample is random but seeded (fast-check `fc.sample` with fixed seeds): the same requests are
 * made on every run, and a failure names the target and the company. The sample is drawn from the
 * proxy's catalog; one more test walks the sandbox's own table of the seed (`src/sandbox/resources.ts`),
 * so that a resource or filter the catalog lacks is found too.
 */
import { connect } from 'node:net';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API_PREFIX, RESOURCES, type ResourceDef } from '../../src/catalog/resources.js';
import { SANDBOX_COMPANIES, type SandboxRecord } from '../../src/sandbox/dataset.js';
import { SEED_RESOURCES } from '../../src/sandbox/resources.js';
import { startStack } from '../helpers/env.js';
import { getWithToken, type RawResponse } from '../helpers/http.js';
import { token } from '../helpers/tokens.js';

type Company = string | number;
type Param = readonly [name: string, value: string];

interface ListCase {
  readonly company: Company;
  readonly params: readonly Param[];
  /** `true`: application/x-www-form-urlencoded spelling (space as `+`); `false`: `%20`. */
  readonly formEncoding: boolean;
}

interface Page {
  readonly data: ReadonlyArray<{ readonly id: number }>;
  readonly meta: { readonly per_page: number; readonly has_more: boolean; readonly next_after_id: number | null };
}

/** Values that no record holds: the dataset's ids start at 100 000 and its related ids at 500 000. */
const NOTHING_TEXT = ['no-such-value', 'nothing & nowhere', 'ünknown;=+/?#', '100%', 'a b+c'] as const;
const BEYOND_LAST = 9_000_000;

function encodeValue(value: string, form: boolean): string {
  return form ? new URLSearchParams([['v', value]]).toString().slice(2) : encodeURIComponent(value);
}

function listTarget(resource: string, params: readonly Param[], form = false): string {
  const query = params.map(([n, v]) => `${n}=${encodeValue(v, form)}`).join('&');
  return `${API_PREFIX}/${resource}${query === '' ? '' : `?${query}`}`;
}

function sameCompany(record: SandboxRecord, company: Company): boolean {
  return String(record.company_id) === String(company);
}

/** What a faithful server answers, straight from the seed's rules and the dataset (the oracle). */
function expectedPage(records: readonly SandboxRecord[], company: Company, params: readonly Param[]): Page {
  const values = new Map(params);
  const perPage = Number(values.get('per_page') ?? '30');
  const after = Number(values.get('after_id') ?? '0');
  const filters = params.filter(([n]) => n !== 'per_page' && n !== 'after_id');
  const matching = records.filter(
    (r) => sameCompany(r, company) && r.id > after && filters.every(([n, v]) => String(r[n]) === v),
  );
  const data = matching.slice(0, perPage).map((r) => ({ id: r.id }));
  const hasMore = matching.length > perPage;
  return {
    data,
    meta: { per_page: perPage, has_more: hasMore, next_after_id: hasMore ? (data.at(-1)?.id ?? null) : null },
  };
}

function page(res: RawResponse): Page {
  return res.json() as Page;
}

/** Ids strictly between two consecutive records of a resource (the dataset leaves gaps). */
function gapIds(records: readonly SandboxRecord[]): number[] {
  const gaps: number[] = [];
  for (let i = 1; i < records.length; i++) {
    const previous = (records[i - 1] as SandboxRecord).id;
    if ((records[i] as SandboxRecord).id - previous > 1) gaps.push(previous + 1);
  }
  return gaps;
}

/** Sends one request and returns every byte the server wrote until it closed the connection. */
function rawExchange(baseUrl: string, request: string): Promise<Buffer> {
  const url = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(url.port), url.hostname);
    const chunks: Buffer[] = [];
    socket.setTimeout(10_000, () => socket.destroy(new Error('timeout')));
    socket.on('connect', () => socket.write(request));
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('error', reject);
    socket.on('close', () => resolve(Buffer.concat(chunks)));
  });
}

describe('conformance: the proxy answers exactly as the system of record', () => {
  let stack: Awaited<ReturnType<typeof startStack>>;
  const tokens = new Map<string, string>();
  let requestCount = 0;

  function tokenFor(company: Company): string {
    const value = tokens.get(String(company));
    if (value === undefined) throw new Error(`no token for ${String(company)}`);
    return value;
  }

  function recordsOf(resource: ResourceDef): readonly SandboxRecord[] {
    return stack.sandbox.dataset.get(resource.name) ?? [];
  }

  /** The same target, to both; asserts the two answers are the same bytes; returns the proxy's. */
  async function both(target: string, company: Company): Promise<{ proxy: RawResponse; direct: RawResponse }> {
    const t = tokenFor(company);
    const [proxy, direct] = await Promise.all([
      getWithToken(stack.proxy.url, target, t),
      getWithToken(stack.sandbox.url, target, t),
    ]);
    requestCount += 2;
    const label = `${target} (company ${String(company)})`;
    expect(proxy.status, label).toBe(direct.status);
    expect(proxy.headers['content-type'], label).toBe(direct.headers['content-type']);
    expect(
      proxy.body.equals(direct.body),
      `${label}\nproxy:  ${proxy.text.slice(0, 300)}\ndirect: ${direct.text.slice(0, 300)}`,
    ).toBe(true);
    return { proxy, direct };
  }

  beforeAll(async () => {
    stack = await startStack();
    for (const company of SANDBOX_COMPANIES) tokens.set(String(company), await token({ company }));
  });
  afterAll(async () => {
    await stack.close();
    // The suite is meant to stay small: a few hundred requests, not thousands.
    expect(requestCount).toBeLessThan(600);
  });

  function listCases(resource: ResourceDef, seed: number): ListCase[] {
    const records = recordsOf(resource);
    const ids = records.map((r) => r.id);
    const gaps = gapIds(records);
    const last = ids.at(-1) ?? 0;
    const cursor = fc.oneof(
      fc.constant('0'),
      fc.constantFrom(...ids).map(String),
      fc.constantFrom(...(gaps.length > 0 ? gaps : [last + 1])).map(String),
      fc.integer({ min: last + 1, max: BEYOND_LAST }).map(String),
    );
    const param = <T>(p: fc.Arbitrary<T>) => fc.option(p, { nil: undefined, freq: 3 });
    // Each case is anchored on a real record: its filter values mostly come from that record, so
    // combined filters select something; some are swapped for another record's value or for a value
    // that matches nothing, and the company is sometimes another one than the anchor's.
    const arbitrary = fc
      .constantFrom(...records)
      .chain((anchor) => {
        const filterValue = (name: string, grammar: string): fc.Arbitrary<string> => {
          const own = fc.constant(String(anchor[name]));
          const any = fc.constantFrom(...new Set(records.map((r) => String(r[name]))));
          if (grammar === 'boolean') return fc.oneof(own, any); // `true` and `false` both match something
          const nothing =
            grammar === 'id' ? fc.integer({ min: 1, max: 99_999 }).map(String) : fc.constantFrom(...NOTHING_TEXT);
          return fc.oneof(
            { weight: 6, arbitrary: own },
            { weight: 1, arbitrary: any },
            { weight: 1, arbitrary: nothing },
          );
        };
        // Cursors before the anchor (a real id, or the id just below it), so the anchor stays in view.
        const anchorCursor = fc
          .oneof(fc.constantFrom(0, ...ids.filter((id) => id < anchor.id)), fc.constant(anchor.id - 1))
          .map(String);
        return fc.record({
          company: fc.oneof(
            { weight: 4, arbitrary: fc.constant(anchor.company_id) },
            { weight: 1, arbitrary: fc.constantFrom(...SANDBOX_COMPANIES) },
          ),
          perPage: param(fc.integer({ min: 1, max: 100 }).map((n): Param => ['per_page', String(n)])),
          after: param(fc.oneof(anchorCursor, cursor).map((c): Param => ['after_id', c])),
          filters: fc.tuple(
            ...resource.filters.map((f) => param(filterValue(f.name, f.grammar).map((v): Param => [f.name, v]))),
          ),
          formEncoding: fc.boolean(),
          order: fc.integer({ min: 0, max: 1_000_000 }),
        });
      })
      .map(({ company, perPage, after, filters, formEncoding, order }): ListCase => {
        const params = [perPage, after, ...filters].filter((p): p is Param => p !== undefined);
        // A seeded rotation and optional reversal: parameter order varies, reproducibly.
        const rotated = params.map((_, i) => params[(i + order) % params.length] as Param);
        return { company, params: order % 2 === 0 ? rotated : rotated.reverse(), formEncoding };
      });
    return fc.sample(arbitrary, { seed, numRuns: 9 });
  }

  it.each(RESOURCES.map((r, index) => [r.name, r, index] as const))(
    'lists of %s: byte-identical for a seeded sample of filters, page sizes, cursors and companies',
    async (_name, resource, index) => {
      const records = recordsOf(resource);
      // The plain list first, then the sample.
      const cases: ListCase[] = [
        { company: 1, params: [], formEncoding: false },
        ...listCases(resource, 0x5eed + index),
      ];
      let nonEmpty = 0;
      for (const c of cases) {
        const target = listTarget(resource.name, c.params, c.formEncoding);
        const { proxy } = await both(target, c.company);
        expect(proxy.status, target).toBe(200);
        const got = page(proxy);
        const expected = expectedPage(records, c.company, c.params);
        expect({ ids: got.data.map((r) => r.id), meta: got.meta }, `${target} (company ${String(c.company)})`).toEqual({
          ids: expected.data.map((r) => r.id),
          meta: expected.meta,
        });
        if (got.data.length > 0) nonEmpty += 1;
      }
      // The sample is not all empty pages (it would compare nothing of interest).
      expect(nonEmpty).toBeGreaterThan(1);
    },
  );

  it.each(RESOURCES.map((r, index) => [r.name, r, index] as const))(
    'records of %s: own company 200, other company and nonexistent ids 404, byte-identical',
    async (_name, resource, index) => {
      const records = recordsOf(resource);
      const gaps = gapIds(records);
      const last = records.at(-1)?.id ?? 0;
      const arbitrary = fc.record({
        record: fc.constantFrom(...records),
        askers: fc.shuffledSubarray([...SANDBOX_COMPANIES], { minLength: 2, maxLength: 2 }),
        missing: fc.oneof(
          fc.constantFrom(...(gaps.length > 0 ? gaps : [last + 1])),
          fc.integer({ min: 1, max: 99_999 }),
          fc.integer({ min: last + 1, max: Number.MAX_SAFE_INTEGER }),
        ),
      });
      for (const { record, askers, missing } of fc.sample(arbitrary, { seed: 0xc0de + index, numRuns: 2 })) {
        const owner = record.company_id;
        const stranger = askers.find((c) => String(c) !== String(owner)) ?? askers[0] ?? 1;
        const target = `${API_PREFIX}/${resource.name}/${record.id}`;

        const own = await both(target, owner);
        expect(own.proxy.status, target).toBe(200);
        expect((own.proxy.json() as { data: SandboxRecord }).data).toEqual(record);

        const other = await both(target, stranger);
        expect(other.proxy.status, `${target} asked by ${String(stranger)}`).toBe(404);

        const absent = await both(`${API_PREFIX}/${resource.name}/${missing}`, owner);
        expect(absent.proxy.status, `${resource.name}/${missing}`).toBe(404);
      }
    },
  );

  it.each(SEED_RESOURCES.map((r) => ({ name: r.name, filters: r.filters })))(
    '$name: every filter the seed names is served, byte-identical (the sandbox’s table of seed §2)',
    async ({ name, filters }) => {
      const anchor = (stack.sandbox.dataset.get(name) ?? []).find((r) => r.company_id === 1);
      if (anchor === undefined) throw new Error(`no ${name} record of company 1`);
      for (const filter of filters) {
        const target = listTarget(name, [[filter, String(anchor[filter])]]);
        const { proxy } = await both(target, 1);
        expect(proxy.status, target).toBe(200);
        expect(
          page(proxy).data.map((r) => r.id),
          target,
        ).toContain(anchor.id);
      }
    },
  );

  it('text filters: `+`, `%20`, `%2B` and raw reserved characters read as a plain server reads them', async () => {
    const warehouses = stack.sandbox.dataset.get('warehouses') ?? [];
    const companyWith = (code: string): Company => {
      const found = warehouses.find((r) => r.code === code);
      if (found === undefined) throw new Error(`no warehouse with code ${code}`);
      return found.company_id;
    };
    const idsOf = (company: Company, code: string) =>
      warehouses
        .filter((r) => sameCompany(r, company) && r.code === code)
        .map((r) => r.id)
        .slice(0, 30);
    const cases: ReadonlyArray<readonly [rawQuery: string, code: string, decoded: string]> = [
      ['code=A+B%2F7', 'A+B/7', 'A B/7'], // `+` is a space: matches nothing
      ['code=A%2BB%2F7', 'A+B/7', 'A+B/7'],
      ['code=A%2BB/7', 'A+B/7', 'A+B/7'], // `/` may stay raw in a query
      ['code=A%20B%2F7', 'A+B/7', 'A B/7'],
      ['code=Z%C3%BCrich+Nord', 'Zürich Nord', 'Zürich Nord'],
      ['code=Z%C3%BCrich%20Nord', 'Zürich Nord', 'Zürich Nord'],
      ['code=Z%C3%BCrich%2BNord', 'Zürich Nord', 'Zürich+Nord'],
      ['code=yard+%26+dock', 'yard & dock', 'yard & dock'],
      ['code=bay=3;east', 'bay=3;east', 'bay=3;east'], // `=` and `;` inside one value
      ['code=bay%3D3%3Beast', 'bay=3;east', 'bay=3;east'],
    ];
    for (const [rawQuery, code, decoded] of cases) {
      // The decoding stated above is the one an ordinary server applies.
      expect(new URLSearchParams(rawQuery).get('code')).toBe(decoded);
      const company = companyWith(code);
      const target = `${API_PREFIX}/warehouses?${rawQuery}`;
      const { proxy } = await both(target, company);
      expect(proxy.status, target).toBe(200);
      expect(
        page(proxy).data.map((r) => r.id),
        target,
      ).toEqual(idsOf(company, decoded));
      if (decoded === code) expect(page(proxy).data.length, target).toBeGreaterThan(0);
      else expect(page(proxy).data, target).toEqual([]);
    }
  });

  it('a keyset walk through the proxy returns exactly the ids of the direct walk and of the dataset', async () => {
    const t = tokenFor(1);
    async function walk(baseUrl: string): Promise<{ ids: number[]; pages: Buffer[] }> {
      const ids: number[] = [];
      const pages: Buffer[] = [];
      let after: number | undefined;
      for (let i = 0; i < 100; i++) {
        const target = `${API_PREFIX}/movements?per_page=37${after === undefined ? '' : `&after_id=${after}`}`;
        const res = await getWithToken(baseUrl, target, t);
        requestCount += 1;
        expect(res.status, target).toBe(200);
        const body = page(res);
        expect(body.data.length).toBeLessThanOrEqual(37);
        expect(body.meta.per_page).toBe(37);
        ids.push(...body.data.map((r) => r.id));
        pages.push(res.body);
        if (!body.meta.has_more) return { ids, pages };
        expect(body.meta.next_after_id).toBe(body.data.at(-1)?.id);
        after = body.meta.next_after_id ?? undefined;
      }
      throw new Error('the walk did not end');
    }
    const viaProxy = await walk(stack.proxy.url);
    const direct = await walk(stack.sandbox.url);
    const expected = (stack.sandbox.dataset.get('movements') ?? []).filter((r) => r.company_id === 1).map((r) => r.id);
    expect(expected.length).toBeGreaterThan(300);
    expect(viaProxy.ids).toEqual(direct.ids);
    expect(viaProxy.ids).toEqual(expected);
    expect(viaProxy.pages.length).toBe(Math.ceil(expected.length / 37));
    for (const [i, bytes] of viaProxy.pages.entries())
      expect(bytes.equals(direct.pages[i] as Buffer), `page ${i}`).toBe(true);
  });

  it.each([
    ['a list page', `${API_PREFIX}/receipts?per_page=5`, 1, 200],
    ['a record', 'own-record', 1, 200],
    ['another company’s record', 'other-record', 2, 404],
  ] as const)(
    'HEAD through the proxy gives the status and Content-Length of GET and no body: %s',
    async (_label, which, company, status) => {
      const receipts = stack.sandbox.dataset.get('receipts') ?? [];
      const ofCompanyOne = receipts.find((r) => r.company_id === 1);
      if (ofCompanyOne === undefined) throw new Error('no receipt of company 1');
      const target = which.startsWith('/') ? which : `${API_PREFIX}/receipts/${ofCompanyOne.id}`;
      const t = tokenFor(company);
      const get = await getWithToken(stack.proxy.url, target, t);
      const host = new URL(stack.proxy.url).host;
      const raw = await rawExchange(
        stack.proxy.url,
        `HEAD ${target} HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer ${t}\r\nConnection: close\r\n\r\n`,
      );
      requestCount += 2;
      const split = raw.indexOf('\r\n\r\n');
      expect(split).toBeGreaterThan(0);
      const head = raw.subarray(0, split).toString('latin1');
      const headStatus = Number(head.split(' ')[1]);
      const contentLength = /\r\ncontent-length: *(\d+)/i.exec(head)?.[1];
      expect(get.status).toBe(status);
      expect(headStatus).toBe(status);
      expect(contentLength).toBe(String(get.body.length));
      expect(get.headers['content-length']).toBe(String(get.body.length));
      expect(get.body.length).toBeGreaterThan(0);
      // Not one byte after the header block.
      expect(raw.length - (split + 4)).toBe(0);
    },
  );
});
