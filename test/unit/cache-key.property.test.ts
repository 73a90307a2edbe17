/**
 * Cache keys are injective: no two distinct reads of different companies, partitions, resources
 * or canonical queries share a key, whatever the filter values (fast-check, fixed seed). Each key
 * parses back into exactly the parts it was built from.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Principal } from '../../src/auth/principal.js';
import { cacheAddress, generationKey } from '../../src/cache/entry/cache-key.js';
import { PARTITIONS, type Partition } from '../../src/cache/read/policy.js';
import { API_PREFIX, RESOURCES } from '../../src/catalog/resources.js';
import { ProxyError } from '../../src/errors/proxy-error.js';
import type { CanonicalRead } from '../../src/request/canonical-read.js';
import { canonicaliseTarget } from '../helpers/canonicalise.js';

const SEED = 424242;

const tenantId = fc.oneof(
  fc.bigInt({ min: 1n, max: BigInt(Number.MAX_SAFE_INTEGER) }).map(String),
  fc.stringMatching(/^[A-Za-z0-9_-]{1,64}$/),
);
/** Hostile text: the characters keys are built from, and anything else. */
const hostileText = fc
  .array(
    fc.oneof(
      fc.constantFrom(':', '{', '}', '|', '&', '=', '%', ';', ' ', 'a:1:receipts', '}{', 'co', 'gen', 'lease'),
      fc.string({ unit: 'grapheme', minLength: 1, maxLength: 4 }),
    ),
    { minLength: 1, maxLength: 12 },
  )
  .map((parts) =>
    [...parts.join('')]
      .filter((c) => !/\p{Cc}/u.test(c))
      .slice(0, 128)
      .join(''),
  )
  .filter((s) => s.length > 0);

const read: fc.Arbitrary<CanonicalRead> = fc
  .record({
    resource: fc.constantFrom(...RESOURCES),
    record: fc.boolean(),
    id: fc.bigInt({ min: 1n, max: 9_999_999n }).map(String),
    text: hostileText,
    perPage: fc.integer({ min: 1, max: 100 }),
  })
  .map(({ resource, record, id, text, perPage }) => {
    const textFilter = resource.filters.find((f) => f.grammar === 'text');
    const query =
      textFilter === undefined
        ? `per_page=${perPage}`
        : `per_page=${perPage}&${textFilter.name}=${encodeURIComponent(text)}`;
    const result = canonicaliseTarget(`${API_PREFIX}/${resource.name}${record ? `/${id}` : `?${query}`}`);
    if (result instanceof ProxyError) throw new Error(`generator made an invalid read: ${result.code}`);
    return result;
  });

const principal: fc.Arbitrary<Principal> = fc
  .record({ company: tenantId, employee: fc.option(tenantId, { nil: undefined }), sub: hostileText })
  .map(({ company, employee, sub }) => ({
    company,
    credential: `sub:${sub}`,
    subject: sub,
    tokenId: undefined,
    permissions: new Set<string>(),
    employee: employee === undefined ? undefined : { id: employee, permissions: new Set<string>() },
    scope: undefined,
    modules: undefined,
    expiresAt: 0,
    tokenDigest: 'digest-of-a-token',
  }));

const partition = fc.constantFrom<Partition>(...PARTITIONS);

/** What a key must tell apart: everything that can change the upstream's answer or its audience. */
function identity(r: CanonicalRead, p: Principal, part: Partition): string {
  const who = part === 'company' ? '' : part === 'employee' ? `e=${p.employee?.id ?? '-'}` : `c=${p.credential}`;
  return JSON.stringify([p.company, part, who, r.upstreamTarget]);
}

describe('cache keys', () => {
  it('never map two different reads, tenants or partitions to one key', () => {
    fc.assert(
      fc.property(read, principal, partition, read, principal, partition, (r1, p1, s1, r2, p2, s2) => {
        const k1 = cacheAddress('slab', r1, p1, s1).key;
        const k2 = cacheAddress('slab', r2, p2, s2).key;
        if (identity(r1, p1, s1) !== identity(r2, p2, s2)) expect(k1).not.toBe(k2);
        else expect(k1).toBe(k2);
      }),
      { seed: SEED, numRuns: 3000 },
    );
  });

  it('never map two companies to one key even when everything else is equal', () => {
    fc.assert(
      fc.property(read, principal, tenantId, partition, (r, p, otherCompany, part) => {
        fc.pre(otherCompany !== p.company);
        const other = { ...p, company: otherCompany };
        expect(cacheAddress('slab', r, p, part).key).not.toBe(cacheAddress('slab', r, other, part).key);
      }),
      { seed: SEED, numRuns: 1000 },
    );
  });

  it('parse back into their parts: a one-slot hash tag, then colon-free segments, then the canonical read', () => {
    fc.assert(
      fc.property(read, principal, partition, (r, p, part) => {
        const address = cacheAddress('slab', r, p, part);
        const head = `slab:{${p.company}:${r.resource.name}}:`;
        expect(address.key.startsWith(head)).toBe(true);
        expect(address.generationKey).toBe(generationKey('slab', address.group));
        // After the hash tag: partition, kind, and the read, with no raw `:` from a filter value.
        const afterTag = address.key.slice(head.length).split(':');
        expect(afterTag).toHaveLength(3);
        expect(afterTag[0]).toMatch(/^(co|em-|em\.[A-Za-z0-9_-]+|cr\.[A-Za-z0-9_-]+)$/);
        expect(afterTag[1]).toBe(r.kind === 'list' ? 'list' : 'id');
        expect(afterTag[2]).toBe(r.kind === 'list' ? r.query : r.id);
        // The lease and generation keys can never be an entry's key.
        expect(address.leaseKey).not.toBe(address.key);
        expect(address.generationKey).not.toBe(address.key);
      }),
      { seed: SEED, numRuns: 1000 },
    );
  });

  it('never contain the token or anything but the credential id for credential partitions', () => {
    const r = canonicaliseTarget(`${API_PREFIX}/receipts`);
    if (r instanceof ProxyError) throw new Error(r.code);
    const p: Principal = {
      company: '7',
      credential: 'sub:alice',
      subject: 'alice',
      tokenId: 'jti-1',
      permissions: new Set(),
      employee: { id: '9', permissions: new Set() },
      scope: undefined,
      modules: undefined,
      expiresAt: 0,
      tokenDigest: 'digest-of-a-token',
    };
    expect(cacheAddress('slab', r, p, 'company').key).toBe('slab:{7:receipts}:co:list:per_page=30');
    expect(cacheAddress('slab', r, p, 'employee').key).toBe('slab:{7:receipts}:em.9:list:per_page=30');
    expect(cacheAddress('slab', r, p, 'credential').key).toBe(
      `slab:{7:receipts}:cr.${Buffer.from('sub:alice').toString('base64url')}:list:per_page=30`,
    );
    expect(cacheAddress('slab', r, { ...p, employee: undefined }, 'employee').key).toBe(
      'slab:{7:receipts}:em-:list:per_page=30',
    );
  });
});
