/**
 * A bounded map of recently used entries, for the memos of the hit path (the canonical reads, the
 * verified tokens): a lookup is one `Map#get` while the entry is in the current generation.
 *
 * The two-generation scheme of hashlru (and quick-lru): entries are set into `current`; when it
 * holds `maxSize`, it becomes `previous` and a new `current` begins; a lookup that finds an entry
 * only in `previous` moves it into `current`. What is used stays, what was not used for a whole
 * generation goes: an LRU's behaviour without its bookkeeping on every hit (lru-cache's `get`
 * cost a cache hit ~1 µs across three memos; issue 11). At most 2 × `maxSize` entries are held.
 */
export class RecentMap<K, V> {
  readonly #maxSize: number;
  #current = new Map<K, V>();
  #previous = new Map<K, V>();

  constructor(maxSize: number) {
    if (!Number.isInteger(maxSize) || maxSize < 1) throw new TypeError('maxSize must be a positive integer');
    this.#maxSize = maxSize;
  }

  get(key: K): V | undefined {
    const value = this.#current.get(key);
    if (value !== undefined) return value;
    const older = this.#previous.get(key);
    if (older === undefined) return undefined;
    this.#previous.delete(key);
    this.#add(key, older);
    return older;
  }

  set(key: K, value: V): void {
    if (this.#current.has(key)) this.#current.set(key, value);
    else {
      this.#previous.delete(key);
      this.#add(key, value);
    }
  }

  delete(key: K): void {
    this.#current.delete(key);
    this.#previous.delete(key);
  }

  clear(): void {
    this.#current.clear();
    this.#previous.clear();
  }

  /** Entries held (both generations). */
  get size(): number {
    return this.#current.size + this.#previous.size;
  }

  #add(key: K, value: V): void {
    if (this.#current.size >= this.#maxSize) {
      this.#previous = this.#current;
      this.#current = new Map();
    }
    this.#current.set(key, value);
  }
}
