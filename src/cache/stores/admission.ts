/**
 * Admission to a full in-process tier (the L1, the in-process store: docs/cache.md#admission): a
 * page that would push others out enters only on its second offer within the keys remembered
 * here, the doorkeeper of TinyLFU (Einziger, Friedman and Manes, "TinyLFU: A Highly Efficient
 * Cache Admission Policy", 2017) without its frequency sketch. A crawl or a walk reads each page
 * once: under pressure none of its pages enters, and the pages other companies read again and
 * again stay. While the tier has room, every page enters.
 */
import { RecentMap } from '../../platform/recent-map.js';

/** Keys remembered as offered once, at most (two generations of half of it). */
const REMEMBERED_KEYS = 65_536;

export class Doorkeeper {
  readonly #offered: RecentMap<string, true>;

  constructor(rememberedKeys = REMEMBERED_KEYS) {
    this.#offered = new RecentMap({ maxSize: rememberedKeys });
  }

  /** A page that would evict others is offered: `true` on its second offer (admitted). */
  admit(key: string): boolean {
    if (this.#offered.get(key) === true) {
      this.#offered.delete(key);
      return true;
    }
    this.#offered.set(key, true);
    return false;
  }
}
