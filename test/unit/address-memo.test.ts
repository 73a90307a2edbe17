/**
 * The address memo (src/cache/entry/address-memo.ts) gives what `cacheAddress` gives, for every company
 * and partition: never another company's, employee's or credential's address, however reads and
 * principals interleave; and the same object for one read and company, so that its key is made
 * once.
 */
import { describe, expect, it } from 'vitest';
import { AddressMemo } from '../../src/cache/entry/address-memo.js';
import { cacheAddress } from '../../src/cache/entry/cache-key.js';
import type { Partition } from '../../src/cache/read/policy.js';
import { ProxyError } from '../../src/errors/proxy-error.js';
import type { CanonicalRead } from '../../src/request/canonical-read.js';
import { canonicaliseTarget } from '../helpers/canonicalise.js';
import { testPrincipal } from '../helpers/principals.js';

function read(target: string): CanonicalRead {
  const canonical = canonicaliseTarget(`/api/slab/v1/operations/${target}`);
  if (canonical instanceof ProxyError) throw new Error(canonical.code);
  return canonical;
}

const READS = ['receipts?per_page=5', 'movements?after_id=40&per_page=30', 'warehouses/7'].map(read);
const PRINCIPALS = [
  testPrincipal({ company: '1', subject: 'a' }),
  testPrincipal({ company: '2', subject: 'a' }),
  testPrincipal({ company: '1', subject: 'b', employee: { id: '17', permissions: new Set() } }),
  testPrincipal({ company: '1', subject: 'c', employee: { id: '18', permissions: new Set() } }),
  testPrincipal({ company: 'globex', subject: 'a' }),
];
const PARTITIONS: Partition[] = ['company', 'employee', 'credential'];

describe('the address memo', () => {
  it('answers cacheAddress for every read, principal and partition, in any order', () => {
    const memo = new AddressMemo('slab');
    for (let round = 0; round < 3; round++)
      for (const partition of PARTITIONS)
        for (const principal of round === 1 ? [...PRINCIPALS].reverse() : PRINCIPALS)
          for (const canonical of READS)
            expect(memo.address(canonical, principal, partition)).toEqual(
              cacheAddress('slab', canonical, principal, partition),
            );
  });

  it('makes a company’s address of a read once', () => {
    const memo = new AddressMemo('slab');
    const [first, other] = READS;
    const [one, two] = PRINCIPALS;
    if (first === undefined || other === undefined || one === undefined || two === undefined)
      throw new Error('fixtures');
    const address = memo.address(first, one, 'company');
    expect(memo.address(first, testPrincipal({ company: '1', subject: 'z' }), 'company')).toBe(address);
    expect(memo.address(first, two, 'company')).not.toBe(address);
    expect(memo.address(first, two, 'company').key).not.toBe(address.key);
    expect(memo.address(other, one, 'company')).not.toBe(address);
  });

  it('keeps a read’s addresses of a bounded number of companies, and stays right past it', () => {
    const memo = new AddressMemo('slab');
    const [first] = READS;
    if (first === undefined) throw new Error('fixtures');
    for (let company = 0; company < 100; company++) {
      const principal = testPrincipal({ company: `c${String(company)}` });
      expect(memo.address(first, principal, 'company')).toEqual(cacheAddress('slab', first, principal, 'company'));
    }
    const last = testPrincipal({ company: 'c99' });
    expect(memo.address(first, last, 'company')).toBe(memo.address(first, last, 'company'));
  });
});
