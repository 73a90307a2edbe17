/**
 * What each company holds of an in-process tier, in bytes, and whether it holds more than its
 * share (docs/cache.md#company-shares). The share is the tier's bytes over the companies holding
 * any: a company alone may fill the tier, and while the tier is full a company over its share takes
 * no new room, so that one company's walks and crawls cannot push another company's hot pages out
 * (fairness by bytes, as the upstream budget's line is fair by slots: docs/limits.md#fair-shares).
 */
import { companyOfKey } from '../entry/cache-key.js';

export class CompanyShares {
  /** Company → bytes held; a company holding nothing is absent. */
  readonly #bytes = new Map<string, number>();

  /** An entry under `key` came to be held (`size` > 0) or stopped being held (`size` < 0). */
  held(key: string, size: number): void {
    const company = companyOfKey(key);
    if (company === undefined) return;
    const bytes = (this.#bytes.get(company) ?? 0) + size;
    if (bytes > 0) this.#bytes.set(company, bytes);
    else this.#bytes.delete(company);
  }

  /** Whether the company of `key` holds more than an equal share of `capacity` among the companies holding. */
  overShare(key: string, capacity: number): boolean {
    const company = companyOfKey(key);
    const bytes = company === undefined ? undefined : this.#bytes.get(company);
    return bytes !== undefined && bytes * this.#bytes.size > capacity;
  }

  /** Bytes held by each company holding any. */
  byCompany(): ReadonlyMap<string, number> {
    return this.#bytes;
  }
}
