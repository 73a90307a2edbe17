/**
 * A line of waiting requests that serves companies in turn (docs/limits.md#fair-shares): one line
 * per company, each first come first served, and the companies with requests waiting served in a
 * rotation where each takes as many slots in a row as its weight (weighted round robin). While
 * several companies wait, each gets its weighted share of the slots handed out, whatever the
 * length of its line: for any two companies that both wait throughout, the slots each has taken,
 * divided by its weight, differ by at most one (one turn). A company alone takes every slot (the
 * line is work-conserving). A company whose line empties leaves the rotation, and joins
 * at its end when it waits again.
 */

export interface FairLineEntry {
  readonly company: string;
}

export class FairLine<T extends FairLineEntry> {
  /** Company → its waiting requests, in arrival order; companies in rotation order, the turn first. */
  readonly #lines = new Map<string, Map<number, T>>();
  readonly #weight: (company: string) => number;
  /** Slots the company whose turn it is has taken in this turn. */
  #takenInTurn = 0;
  #size = 0;

  /** `weight`: a company's slots per turn (a whole number, at least 1). */
  constructor(weight: (company: string) => number = () => 1) {
    this.#weight = weight;
  }

  get size(): number {
    return this.#size;
  }

  add(id: number, entry: T): void {
    let line = this.#lines.get(entry.company);
    if (line === undefined) {
      line = new Map();
      this.#lines.set(entry.company, line);
    }
    line.set(id, entry);
    this.#size += 1;
  }

  /** Takes `id` out of its company's line (served, or done waiting); `false` when it was not there. */
  remove(id: number, company: string): boolean {
    const line = this.#lines.get(company);
    if (line === undefined || !line.delete(id)) return false;
    this.#size -= 1;
    if (line.size === 0) this.#leave(company);
    return true;
  }

  /** The request to serve next: the longest waiting of the company whose turn it is. */
  peek(): T | undefined {
    const turn = this.#lines.values().next();
    return turn.done === true ? undefined : turn.value.values().next().value;
  }

  /**
   * `company` (the one whose turn it is) took a slot: once it has taken its weight's worth, the
   * turn passes to the next company, and it goes to the end of the rotation.
   */
  served(company: string): void {
    const line = this.#lines.get(company);
    if (line === undefined || this.#lines.keys().next().value !== company) return;
    this.#takenInTurn += 1;
    if (this.#takenInTurn < Math.max(1, Math.floor(this.#weight(company)))) return;
    this.#takenInTurn = 0;
    this.#lines.delete(company);
    if (line.size > 0) this.#lines.set(company, line);
  }

  /** Every waiting request, companies in rotation order. */
  *values(): IterableIterator<T> {
    for (const line of this.#lines.values()) yield* line.values();
  }

  #leave(company: string): void {
    if (this.#lines.keys().next().value === company) this.#takenInTurn = 0;
    this.#lines.delete(company);
  }
}
