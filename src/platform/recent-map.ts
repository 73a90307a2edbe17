/**
 * A bounded map of recently used entries, for the in-process tiers of the hit path (the L1, the
 * canonical reads, the verified tokens): a lookup is one `Map#get` while the entry is in the
 * current generation.
 *
 * The two-generation scheme of hashlru (and quick-lru): entries are set into `current`; when it
 * holds half of `maxSize`, it becomes `previous` (what was `previous` is let go) and a new
 * `current` begins; a lookup that finds an entry only in `previous` moves it into `current` (while
 * `current` has room: a lookup never turns a generation). What
 * is used stays, what was not used for a whole generation goes: an LRU's behaviour without an
 * LRU's bookkeeping on every hit (docs/architecture.md#why-the-hit-path-is-built-as-it-is). Sizes are counted with `sizeOf` (1 per entry by default); what is held never
 * exceeds `maxSize`, and an entry larger than a generation is not kept.
 */
export interface RecentMapOptions<K, V> {
  /** The most held, in the units of `sizeOf`; each generation holds at most half of it. */
  readonly maxSize: number;
  /** An entry's size; a pure function of the entry (default: 1 per entry). */
  readonly sizeOf?: (value: V, key: K) => number;
  /**
   * Told of every entry that comes to be held (`+size`) and that stops being held (`-size`:
   * deleted, replaced, or let go with its generation), for a ledger of what is held by owner. A
   * lookup that moves an entry between generations is neither.
   */
  readonly onHeld?: (key: K, size: number) => void;
}

const ONE = (): number => 1;

export class RecentMap<K, V> {
  readonly #generationSize: number;
  readonly #sizeOf: (value: V, key: K) => number;
  readonly #onHeld: ((key: K, size: number) => void) | undefined;
  #current = new Map<K, V>();
  #currentSize = 0;
  #previous = new Map<K, V>();
  #previousSize = 0;

  constructor(options: RecentMapOptions<K, V>) {
    const { maxSize } = options;
    if (!Number.isInteger(maxSize) || maxSize < 2) throw new TypeError('maxSize must be an integer of at least 2');
    this.#generationSize = Math.floor(maxSize / 2);
    this.#sizeOf = options.sizeOf ?? ONE;
    this.#onHeld = options.onHeld;
  }

  get(key: K): V | undefined {
    const value = this.#current.get(key);
    if (value !== undefined) return value;
    const older = this.#previous.get(key);
    if (older === undefined) return undefined;
    const size = this.#sizeOf(older, key);
    // A lookup never turns a generation: only a `set` lets entries go, so that a full tier whose
    // sets are refused (admission.ts) keeps what is read, however it is read.
    if (this.#currentSize + size > this.#generationSize) return older;
    this.#previous.delete(key);
    this.#previousSize -= size;
    this.#add(key, older, size);
    return older;
  }

  set(key: K, value: V): void {
    const size = this.#sizeOf(value, key);
    if (size <= this.#generationSize && this.#replaced(key, value, size)) return;
    this.delete(key);
    if (size > this.#generationSize) return;
    this.#add(key, value, size);
    this.#onHeld?.(key, size);
  }

  /**
   * A key held already takes its new value where it is, when that fits its generation: setting a
   * held key again (a page refreshed, a copy confirmed) never turns a generation, so it never lets
   * go of other entries that a turn would (a tier full of one company's pages would otherwise drop
   * another's hot pages each time one of its own was refreshed).
   */
  #replaced(key: K, value: V, size: number): boolean {
    const current = this.#current.get(key);
    if (current !== undefined) {
      const old = this.#sizeOf(current, key);
      if (this.#currentSize - old + size > this.#generationSize) return false;
      this.#current.set(key, value);
      this.#currentSize += size - old;
      this.#onHeld?.(key, -old);
      this.#onHeld?.(key, size);
      return true;
    }
    const previous = this.#previous.get(key);
    // In the older generation, moved into the current one when it has room (as a lookup moves it).
    if (previous === undefined || this.#currentSize + size <= this.#generationSize) return false;
    const old = this.#sizeOf(previous, key);
    if (this.#previousSize - old + size > this.#generationSize) return false;
    this.#previous.set(key, value);
    this.#previousSize += size - old;
    this.#onHeld?.(key, -old);
    this.#onHeld?.(key, size);
    return true;
  }

  delete(key: K): void {
    const current = this.#current.get(key);
    if (current !== undefined) {
      this.#current.delete(key);
      const size = this.#sizeOf(current, key);
      this.#currentSize -= size;
      this.#onHeld?.(key, -size);
    }
    const previous = this.#previous.get(key);
    if (previous !== undefined) {
      this.#previous.delete(key);
      const size = this.#sizeOf(previous, key);
      this.#previousSize -= size;
      this.#onHeld?.(key, -size);
    }
  }

  /** Whether `key` is held (neither moved nor counted as a use). */
  has(key: K): boolean {
    return this.#current.has(key) || this.#previous.has(key);
  }

  /** Whether setting an entry of `size` now would let older entries go (a new generation). */
  wouldEvict(size: number): boolean {
    return this.#currentSize + size > this.#generationSize && this.#previousSize > 0;
  }

  /** Entries held (both generations). */
  get size(): number {
    return this.#current.size + this.#previous.size;
  }

  /** Their total size, in the units of `sizeOf`. */
  get totalSize(): number {
    return this.#currentSize + this.#previousSize;
  }

  #add(key: K, value: V, size: number): void {
    if (this.#currentSize + size > this.#generationSize) {
      if (this.#onHeld !== undefined) this.#letGo(this.#previous, this.#onHeld);
      this.#previous = this.#current;
      this.#previousSize = this.#currentSize;
      this.#current = new Map();
      this.#currentSize = 0;
    }
    this.#current.set(key, value);
    this.#currentSize += size;
  }

  /** Tells `onHeld` of each entry of a generation let go. */
  #letGo(generation: Map<K, V>, onHeld: (key: K, size: number) => void): void {
    for (const [key, value] of generation) onHeld(key, -this.#sizeOf(value, key));
  }
}
