/**
 * Properties of canonicalisation (fast-check, fixed seed so failures reproduce):
 * idempotent, insensitive to order and encoding, injective over valid requests, and nothing that
 * was not validated ever reaches the upstream target.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { GRAMMAR_CHECKS, isCursor, isPerPage, PER_PAGE_DEFAULT } from '../../src/catalog/grammar.js';
import { API_PREFIX, RESOURCES, type ResourceDef } from '../../src/catalog/resources.js';
import { ProxyError } from '../../src/errors/proxy-error.js';
import { canonicaliseTarget } from '../helpers/canonicalise.js';

const SEED = 20261122;
const RUNS = { seed: SEED, numRuns: 400 };

const positiveId = fc.bigInt({ min: 1n, max: BigInt(Number.MAX_SAFE_INTEGER) }).map(String);
/** Text values: any code points but controls, 1–128 of them, and the troublesome ASCII often. */
const textValue = fc
  .array(
    fc.oneof(
      fc.constantFrom('&', '=', ';', '+', '%', '#', '?', '/', ' ', ':', '{', '}', '|', '"', "'", '*', '\\'),
      fc.string({ unit: 'grapheme', minLength: 1, maxLength: 3 }),
    ),
    { minLength: 1, maxLength: 40 },
  )
  .map((parts) =>
    [...parts.join('')]
      .filter((c) => !/\p{Cc}/u.test(c))
      .slice(0, 128)
      .join(''),
  )
  .filter((s) => s.length > 0);

function valueFor(grammar: string): fc.Arbitrary<string> {
  if (grammar === 'id') return positiveId;
  if (grammar === 'boolean') return fc.constantFrom('true', 'false');
  return textValue;
}

interface ValidRequest {
  readonly resource: ResourceDef;
  readonly params: ReadonlyArray<readonly [string, string]>;
}

/** A valid list request: some filters, maybe per_page, maybe after_id, in generated order. */
const validRequest: fc.Arbitrary<ValidRequest> = fc.constantFrom(...RESOURCES).chain((resource) =>
  fc
    .record({
      filters: fc
        .subarray([...resource.filters])
        .chain((filters) => fc.tuple(...filters.map((f) => valueFor(f.grammar).map((v) => [f.name, v] as const)))),
      perPage: fc.option(fc.integer({ min: 1, max: 100 }).map(String), { nil: undefined }),
      afterId: fc.option(fc.oneof(fc.constant('0'), positiveId), { nil: undefined }),
    })
    .chain(({ filters, perPage, afterId }) => {
      const params: Array<readonly [string, string]> = [...filters];
      if (perPage !== undefined) params.push(['per_page', perPage]);
      if (afterId !== undefined) params.push(['after_id', afterId]);
      return fc
        .shuffledSubarray(params, { minLength: params.length, maxLength: params.length })
        .map((shuffled) => ({ resource, params: shuffled }));
    }),
);

/** One of the many spellings a client may use for the same text. */
function spell(text: string, style: number): string {
  if (style === 0) return encodeURIComponent(text);
  if (style === 1) return encodeURIComponent(text).replaceAll('%20', '+');
  // Percent-encode every byte, letters included.
  return [...Buffer.from(text, 'utf8')].map((b) => `%${b.toString(16).padStart(2, '0').toUpperCase()}`).join('');
}

function urlOf(request: ValidRequest, style: (i: number) => number): string {
  const query = request.params.map(([n, v], i) => `${spell(n, style(i) % 2)}=${spell(v, style(i + 7))}`).join('&');
  return `${API_PREFIX}/${request.resource.name}${query === '' ? '' : `?${query}`}`;
}

function canonicalTarget(url: string): string {
  const result = canonicaliseTarget(url);
  if (result instanceof ProxyError) throw new Error(`refused ${url}: ${result.code}`);
  return result.upstreamTarget;
}

describe('canonicalisation properties', () => {
  it('accepts every valid request and is idempotent', () => {
    fc.assert(
      fc.property(validRequest, (request) => {
        const once = canonicaliseTarget(urlOf(request, () => 0));
        expect(once).not.toBeInstanceOf(ProxyError);
        if (once instanceof ProxyError) return;
        const twice = canonicaliseTarget(once.upstreamTarget);
        expect(twice).toEqual(once);
      }),
      RUNS,
    );
  });

  it('is insensitive to parameter order and to the spelling of each name and value', () => {
    fc.assert(
      fc.property(validRequest, fc.array(fc.nat({ max: 2 }), { minLength: 64, maxLength: 64 }), (request, styles) => {
        const reference = canonicalTarget(urlOf(request, () => 0));
        const reversed = { ...request, params: [...request.params].reverse() };
        expect(canonicalTarget(urlOf(reversed, (i) => styles[i % styles.length] ?? 0))).toBe(reference);
      }),
      RUNS,
    );
  });

  it('treats an absent per_page and per_page=30 as one request', () => {
    fc.assert(
      fc.property(validRequest, (request) => {
        const without = { ...request, params: request.params.filter(([n]) => n !== 'per_page') };
        const explicit = { ...request, params: [...without.params, ['per_page', String(PER_PAGE_DEFAULT)] as const] };
        expect(canonicalTarget(urlOf(without, () => 0))).toBe(canonicalTarget(urlOf(explicit, () => 2)));
      }),
      RUNS,
    );
  });

  it('maps different requests to different targets (no two requests share a canonical form)', () => {
    fc.assert(
      fc.property(validRequest, validRequest, (a, b) => {
        const normalise = (r: ValidRequest): string => {
          const params = new Map(r.params);
          if (!params.has('per_page')) params.set('per_page', String(PER_PAGE_DEFAULT));
          return JSON.stringify([r.resource.name, [...params].sort()]);
        };
        fc.pre(normalise(a) !== normalise(b));
        expect(canonicalTarget(urlOf(a, () => 0))).not.toBe(canonicalTarget(urlOf(b, () => 0)));
      }),
      RUNS,
    );
  });

  it('never lets an unvalidated parameter reach the upstream target, whatever the raw query', () => {
    const rawQuery = fc.array(
      fc.oneof(
        fc.string({ unit: 'binary', maxLength: 30 }),
        fc.constantFrom(
          'per_page=',
          'after_id=',
          'status=',
          'code=',
          'active=',
          '&',
          '=',
          ';',
          '%',
          '%2',
          '%26',
          '%3D',
          '+',
          '#',
        ),
        fc.constantFrom(...RESOURCES.flatMap((r) => r.filters.map((f) => `${f.name}=`))),
      ),
      { maxLength: 12 },
    );
    fc.assert(
      fc.property(fc.constantFrom(...RESOURCES), rawQuery, (resource, parts) => {
        const result = canonicaliseTarget(`${API_PREFIX}/${resource.name}?${parts.join('')}`);
        if (result instanceof ProxyError) {
          expect(['invalid_parameter', 'invalid_request', 'not_found']).toContain(result.code);
          return;
        }
        const [path, query = ''] = result.upstreamTarget.split('?');
        expect(path).toBe(`${API_PREFIX}/${resource.name}`);
        // Strictly encoded: only unreserved characters, `%XX`, and the `=`/`&` separators.
        expect(query).toMatch(/^(?:[A-Za-z0-9\-._~=&]|%[0-9A-F]{2})*$/);
        const names = new Set<string>();
        for (const pair of query.split('&')) {
          const [name = '', encoded = ''] = pair.split('=');
          const value = decodeURIComponent(encoded);
          expect(names.has(name)).toBe(false);
          names.add(name);
          if (name === 'per_page') expect(isPerPage(value)).toBe(true);
          else if (name === 'after_id') expect(isCursor(value)).toBe(true);
          else {
            const filter = resource.filters.find((f) => f.name === name);
            expect(filter).toBeDefined();
            if (filter !== undefined) expect(GRAMMAR_CHECKS[filter.grammar](value)).toBe(true);
          }
        }
        expect(names.has('per_page')).toBe(true);
      }),
      { seed: SEED, numRuns: 2000 },
    );
  });
});
