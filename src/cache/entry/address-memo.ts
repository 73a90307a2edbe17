/**
 * Cache addresses remembered per canonical read. A read is memoised per raw request
 * target (src/request/memo.ts), so every hit of a page brings the same read object, and its
 * address for a company is the same every time: made once here, its key and tag are strings whose
 * hash V8 keeps, so each Map a hit looks them up in (the L1, its generations) compares them at
 * once. An address made per hit was five strings concatenated anew, each flattened and hashed again
 * by every lookup.
 *
 * Only the `company` partition is remembered: its address is a function of the read and the
 * company alone (`cacheAddress`); the others depend on more of the principal and are made per
 * request. A read keeps the addresses of at most `MAX_COMPANIES` companies (a page many companies
 * read starts over when it has that many), and goes when the read does (a WeakMap).
 */
import type { Principal } from '../../auth/principal.js';
import type { CanonicalRead } from '../../request/canonical-read.js';
import type { Partition } from '../read/policy.js';
import { type CacheAddress, cacheAddress } from './cache-key.js';

const MAX_COMPANIES = 16;

export class AddressMemo {
  readonly #prefix: string;
  readonly #byRead = new WeakMap<CanonicalRead, Map<string, CacheAddress>>();

  constructor(prefix: string) {
    this.#prefix = prefix;
  }

  /** `cacheAddress(prefix, read, principal, partition)`, made once per read and company. */
  address(read: CanonicalRead, principal: Principal, partition: Partition): CacheAddress {
    if (partition !== 'company') return cacheAddress(this.#prefix, read, principal, partition);
    let companies = this.#byRead.get(read);
    if (companies === undefined) {
      companies = new Map();
      this.#byRead.set(read, companies);
    }
    let address = companies.get(principal.company);
    if (address === undefined) {
      address = cacheAddress(this.#prefix, read, principal, partition);
      if (companies.size >= MAX_COMPANIES) companies.clear();
      companies.set(principal.company, address);
    }
    return address;
  }
}
