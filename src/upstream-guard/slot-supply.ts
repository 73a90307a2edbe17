/**
 * Where the upstream budget's waiting requests get their slots (docs/limits.md#the-upstream-budget):
 * from the ledger the mode names (src/upstream-guard/budget-mode.ts): the shared one in Redis, through the
 * budget's conversation with it (src/upstream-guard/budget-conversation.ts), none while cut off from it,
 * or this replica's share of the limits (src/upstream-guard/slot-ledger.ts) once every slot the shared one
 * granted must be over. The local ledger also counts every slot this replica holds from the shared
 * one, so a share never comes on top of them, and a rejoin registers them all in Redis.
 *
 * Each granted slot goes to the longest waiting request (`SlotWaiters`), or back when nobody waits;
 * when none can be had now, a wake is planned for when one can.
 */
import type { BudgetConversation } from './budget-conversation.js';
import type { BudgetMode } from './budget-mode.js';
import type { SharedAttempt } from './shared-ledger.js';
import { type BudgetLimits, SEND_BY_MS, type SlotLedger } from './slot-ledger.js';
import type { Slot, SlotWaiters } from './slot-waiters.js';

/** How soon a request waiting for a slot released elsewhere asks the shared ledger again, ms. */
const POLL_MS = 20;
/** How often requests waiting while grants are closed ask whether they opened early, ms. */
const CLOSED_POLL_MS = 50;
/** Slots asked for in one call at most. */
const MAX_BATCH = 16;

/** A slot taken from this replica's share: its id, and how far ahead its start is due, ms. */
interface ShareSlot {
  readonly id: string;
  readonly startsIn: number;
}

export interface SlotSupplyOptions {
  /** This replica's own slots, shared ones too (it knows when its exchanges end). */
  readonly own: SlotLedger;
  readonly waiters: SlotWaiters;
  /** The conversation with the shared ledger; none without Redis (then the mode is `local`). */
  readonly conversation: BudgetConversation | undefined;
  /** The prefix of this replica's slot ids (its id in the shared ledger). */
  readonly id: string;
  /** The limits in force, for every replica together. */
  readonly limits: () => BudgetLimits;
  /** This replica's share of them (src/upstream-guard/budget-mode.ts says when it keeps to it). */
  readonly share: () => BudgetLimits;
  readonly now: () => number;
  /** Told when a planned wake comes: the mode may have changed, and slots may be had. */
  readonly changed: () => void;
}

export class SlotSupply {
  readonly #options: SlotSupplyOptions;
  readonly #own: SlotLedger;
  readonly #waiters: SlotWaiters;
  readonly #conversation: BudgetConversation | undefined;
  #nextId = 0;
  /** A call for slots is out (a shared grant, or a rejoining replica's registration of its share). */
  #asking = false;
  /** When this replica last asked the shared ledger while its grants were closed. */
  #lastClosedAsk = Number.NEGATIVE_INFINITY;
  #wake: { readonly at: number; readonly timer: NodeJS.Timeout } | undefined;
  #closed = false;

  constructor(options: SlotSupplyOptions) {
    this.#options = options;
    this.#own = options.own;
    this.#waiters = options.waiters;
    this.#conversation = options.conversation;
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** Where slots come from now. */
  mode(): BudgetMode {
    return this.#conversation === undefined ? 'local' : this.#conversation.mode();
  }

  /** Hands slots to the waiting requests from the ledger the mode names, or plans when to try. */
  pump(): void {
    if (this.#closed || this.#waiters.size === 0) return;
    const now = this.#options.now();
    const conversation = this.#conversation;
    const mode = this.mode();
    if (conversation === undefined || mode === 'local') return this.#grantLocally(now);
    if (mode === 'rejoining') return void this.#grantRejoining(conversation, now);
    if (mode === 'cut-off') return this.#wakeAt(conversation.fallbackAt);
    // Closed: grants open at `openAt`, or sooner once every replica has registered (the ledger's
    // quorum), which asking tells.
    if (mode === 'closed') return this.#pollClosed(conversation, now);
    void this.#askShared(conversation);
  }

  /** A slot is over (its exchange ended, or it went unused): it counts nowhere from now on. */
  release(slot: Slot): void {
    this.#own.release(slot.id);
    this.#conversation?.release(slot.id);
    this.pump();
  }

  /** Pumps again when the shared ledger's grants open (or sooner, if planned so). */
  wakeAtOpening(): void {
    if (this.#conversation !== undefined) this.#wakeAt(this.#conversation.openAt);
  }

  /** Hands out nothing from now on. */
  close(): void {
    this.#closed = true;
    if (this.#wake !== undefined) clearTimeout(this.#wake.timer);
  }

  /** Pumps again at `at` (this replica's clock), unless an earlier wake is planned. */
  #wakeAt(at: number): void {
    if (this.#closed) return;
    if (this.#wake !== undefined && this.#wake.at <= at) return;
    if (this.#wake !== undefined) clearTimeout(this.#wake.timer);
    const timer = setTimeout(
      () => {
        this.#wake = undefined;
        this.#options.changed();
      },
      Math.max(0, at - this.#options.now()),
    );
    timer.unref();
    this.#wake = { at, timer };
  }

  #ids(count: number): string[] {
    return Array.from({ length: Math.min(count, MAX_BATCH) }, () => `${this.#options.id}:${String(this.#nextId++)}`);
  }

  /**
   * Slots from this replica's share for the waiting requests, or `undefined` when the share has
   * none now: a wake is planned for when the rate allows the next start, else a release pumps again.
   */
  #takeShare(now: number): ShareSlot[] | undefined {
    const ids = this.#ids(this.#waiters.size);
    const result = this.#own.grant(now, ids, this.#options.share());
    if (result.kind === 'full') {
      if (result.retryInMs !== undefined) this.#wakeAt(now + result.retryInMs);
      return undefined;
    }
    return result.startsInMs.map((startsIn, i) => ({ id: ids[i] ?? '', startsIn }));
  }

  #grantLocally(now: number): void {
    // A slot taken while this replica's slots are being registered would miss the registration,
    // and the ledger, once its quorum opens grants, would not count it: the answer pumps again.
    if (this.#conversation?.registering === true) return;
    const granted = this.#takeShare(now);
    if (granted === undefined) return;
    this.#conversation?.tookShare();
    for (const { id, startsIn } of granted) this.#hand(id, now + startsIn, now + startsIn);
  }

  /**
   * Rejoining: a slot from this replica's share, registered in the shared ledger before it is
   * used, so that the ledger counts it once grants open for everyone. Once they are open (the
   * quorum can open them before this replica hears of it), the ledger registers nothing: the slot
   * goes back unused, and the request asks the ledger like any other.
   */
  async #grantRejoining(conversation: BudgetConversation, now: number): Promise<void> {
    if (this.#asking) return;
    const granted = this.#takeShare(now);
    if (granted === undefined) return;
    this.#asking = true;
    const slots = granted.map(({ id, startsIn }) => ({ id, ageMs: -startsIn }));
    await conversation.talk(
      () =>
        conversation.registerShare(slots, (registered) => {
          for (const { id, startsIn } of granted) {
            if (registered) this.#hand(id, now + startsIn, now + startsIn);
            else this.#own.release(id); // never used unless registered
          }
        }),
      () => {
        this.#asking = false;
      },
    );
  }

  /** Requests wait while grants are closed: asks again every `CLOSED_POLL_MS`, for an early opening. */
  #pollClosed(conversation: BudgetConversation, now: number): void {
    if (this.#asking) return;
    if (this.#lastClosedAsk + CLOSED_POLL_MS <= now) {
      this.#lastClosedAsk = now;
      void this.#askShared(conversation);
      return;
    }
    this.#wakeAt(Math.min(conversation.openAt, this.#lastClosedAsk + CLOSED_POLL_MS));
  }

  /**
   * Gives a granted slot to the longest waiting request (or back, when nobody waits). Its start
   * is due between `dueFrom` and `dueTo` on this clock (a shared grant's, somewhere within the
   * call's round trip): it starts no earlier than the one, and is sent no later than `SEND_BY_MS`
   * after the other (src/upstream-guard/slot-ledger.ts).
   */
  #hand(id: string, dueFrom: number, dueTo: number): void {
    const slot = { id, startAt: dueTo, startBy: dueFrom + SEND_BY_MS };
    if (!this.#waiters.hand(slot)) this.release(slot);
  }

  async #askShared(conversation: BudgetConversation): Promise<void> {
    if (this.#asking) return;
    this.#asking = true;
    const ids = this.#ids(this.#waiters.size);
    const askedAt = this.#options.now();
    await conversation.talk(
      () =>
        conversation.acquire(ids, this.#options.limits(), (attempt, at) =>
          this.#answered(conversation, attempt, ids, askedAt, at),
        ),
      () => {
        this.#asking = false;
      },
    );
  }

  /** The shared ledger's answer at `now` to `ids`, asked for at `askedAt`. */
  async #answered(
    conversation: BudgetConversation,
    attempt: SharedAttempt,
    ids: readonly string[],
    askedAt: number,
    now: number,
  ): Promise<void> {
    switch (attempt.kind) {
      case 'granted':
        for (const [i, startsIn] of attempt.startsInMs.entries()) {
          const id = ids[i] ?? '';
          this.#own.record(id, now + startsIn, now);
          this.#hand(id, askedAt + startsIn, now + startsIn);
        }
        return;
      case 'full':
        return this.#wakeAt(now + (attempt.retryInMs ?? POLL_MS));
      case 'closed':
        return this.#wakeAt(Math.min(conversation.openAt, now + CLOSED_POLL_MS));
      case 'epoch':
        return conversation.register(false);
    }
  }
}
