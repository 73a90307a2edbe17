/**
 * The upstream budget's conversation with the shared ledger in Redis (src/upstream-guard/shared-ledger.ts,
 * docs/architecture.md#the-upstream-budget): the heartbeat that reads the ledger's epoch, the
 * registration of this replica's slots in a new epoch or on its return from its share, the
 * shared grants, and the release there of each slot the ledger counts. What each answer or failure
 * says is kept by `BudgetContact` (src/upstream-guard/budget-mode.ts), hence the mode.
 *
 * The budget asks it for the mode and for shared grants and registrations; it tells the budget
 * once each exchange has settled, since the mode may have changed: the budget then tells whoever
 * waits on the mode, and serves its waiting requests from where the mode now says
 * (src/upstream-guard/slot-supply.ts).
 */
import { randomUUID } from 'node:crypto';
import type { RedisClient } from '../platform/redis/connection.js';
import { BudgetContact, type BudgetMode } from './budget-mode.js';
import { type RegisterCaller, type RegisterRole, type SharedAttempt, SharedLedger } from './shared-ledger.js';
import type { BudgetLimits } from './slot-ledger.js';

/** A slot counts in a ledger this much longer than the exchange's deadline (timers run late). */
export const HOLD_MARGIN_MS = 2_000;
/** How often each replica asks the shared ledger for its epoch, ms. */
export const HEARTBEAT_MS = 250;
/**
 * How long grants stay closed after a new epoch or a rejoin, ms: longer than a replica that can
 * reach Redis takes to hear of it and register its slots: a heartbeat (250 ms), a command's timeout
 * (250 ms), a reconnection attempt (at most 500 ms: src/platform/redis/connection.ts) and, on a cluster, the
 * periodic refresh of the slot map that finds a promoted master (1 s).
 */
export const REJOIN_MS = 2_000;

/** A slot as a registration names it: how long ago its start was due (negative: ahead). */
export interface SlotAge {
  readonly id: string;
  readonly ageMs: number;
}

export interface BudgetConversationOptions {
  /** The budget's own connection, its keys' prefix, and its command timeout, ms. */
  readonly redis: { readonly client: RedisClient; readonly prefix: string; readonly commandTimeoutMs: number };
  /** How long an upstream exchange may take at most, ms (its deadline). */
  readonly deadlineMs: number;
  /** Cut off from the shared ledger: keep to the share at once, or wait until its grants are over. */
  readonly cutOff: 'wait' | 'share';
  /** This replica's id in the ledger (one per process). */
  readonly id: string;
  /** The most replicas counted lately: the quorum this replica asks for. */
  readonly replicas: () => number;
  readonly now: () => number;
  /** Every slot this replica holds now, for a registration (its local ledger's). */
  readonly holds: (now: number) => readonly SlotAge[];
  /** Told after each exchange has settled, answered or failed: the mode may have changed. */
  readonly changed: () => void;
  readonly onRedisFailure?: ((error: unknown) => void) | undefined;
}

export class BudgetConversation {
  readonly #ledger: SharedLedger;
  readonly #contact: BudgetContact;
  readonly #options: BudgetConversationOptions;
  /** This replica's slots that the shared ledger counts (granted there, or registered). */
  readonly #inShared = new Set<string>();
  readonly #heartbeat: NodeJS.Timeout;
  #beating = false;
  /** This replica's slots are being registered: none is taken from its share meanwhile. */
  #registering = false;
  #closed = false;

  constructor(options: BudgetConversationOptions) {
    this.#options = options;
    const holdMs = options.deadlineMs + HOLD_MARGIN_MS;
    // Past this, every slot the shared ledger granted before it stopped answering is over: its
    // exchange ended by its deadline, and its hold expired. The last answer came at most a
    // heartbeat and a command before the ledger stopped answering anyone.
    const fallbackAfterMs = options.cutOff === 'share' ? 0 : holdMs + HEARTBEAT_MS + options.redis.commandTimeoutMs;
    this.#contact = new BudgetContact(fallbackAfterMs, options.now());
    this.#ledger = new SharedLedger({
      client: options.redis.client,
      prefix: options.redis.prefix,
      holdMs,
      rejoinMs: REJOIN_MS,
      newEpoch: () => randomUUID(),
    });
    this.#heartbeat = setInterval(() => void this.#beat(), HEARTBEAT_MS);
    this.#heartbeat.unref();
    void this.#beat();
  }

  /** Where slots come from now (docs/limits.md#the-upstream-budget). */
  mode(): BudgetMode {
    return this.#contact.mode(this.#options.now());
  }

  /** When grants open, on this replica's clock. */
  get openAt(): number {
    return this.#contact.openAt;
  }

  /** When a `cut-off` replica turns to its share, on this replica's clock. */
  get fallbackAt(): number {
    return this.#contact.fallbackAt;
  }

  /** Whether this replica's slots are being registered: a slot taken now would miss it. */
  get registering(): boolean {
    return this.#registering;
  }

  /** A slot was taken from this replica's share: its return from the share must register it. */
  tookShare(): void {
    this.#contact.tookShare();
  }

  /**
   * Asks the shared ledger for a slot for each of `ids` under `limits`; `take` has its answer and
   * when it came, at once, before anything else hears from the ledger (the slots it granted are
   * counted here from then on).
   */
  async acquire(
    ids: readonly string[],
    limits: BudgetLimits,
    take: (attempt: SharedAttempt, at: number) => Promise<void> | void,
  ): Promise<void> {
    const attempt = await this.#ledger.acquire(this.#contact.epoch, ids, limits);
    const at = this.#options.now();
    this.#contact.answered(at, attempt.openInMs);
    if (attempt.kind === 'granted') for (const id of ids.slice(0, attempt.startsInMs.length)) this.#inShared.add(id);
    await take(attempt, at);
  }

  /**
   * Registers slots a rejoining replica takes from its share, so that the ledger counts them when
   * grants open; the ledger takes them only while grants are closed. `settle` is told at once
   * whether they were registered (not when the call failed): a slot is never used unless it was.
   */
  async registerShare(slots: readonly SlotAge[], settle: (registered: boolean) => void): Promise<void> {
    let registered = false;
    try {
      const view = await this.#ledger.register(slots, false, this.#caller('share'));
      this.#contact.answered(this.#options.now(), view.openInMs);
      registered = view.registered;
      if (registered) for (const { id } of slots) this.#inShared.add(id);
    } finally {
      settle(registered);
    }
  }

  /**
   * Registers every slot this replica holds in the shared ledger's current epoch; no slot is taken
   * from its share meanwhile (`registering`). Called once the ledger has just answered, so the
   * pause is a round trip.
   */
  async register(close: boolean): Promise<void> {
    const holds = this.#options.holds(this.#options.now());
    this.#registering = true;
    try {
      const view = await this.#ledger.register(holds, close, this.#caller('register'));
      this.#contact.answered(this.#options.now(), view.openInMs);
      for (const { id } of holds) this.#inShared.add(id);
      this.#contact.registered(view.epoch, close);
    } finally {
      this.#registering = false;
    }
  }

  /** A slot is over: the shared ledger, when it counts it, is told (it expires there anyway). */
  release(id: string): void {
    if (this.#inShared.delete(id)) this.#ledger.release([id]).catch((error: unknown) => this.#failed(error));
  }

  /**
   * One exchange with the shared ledger: a failure is this replica's news that it is cut off.
   * `settled` runs once it is over, then the budget is told, whatever the answer.
   */
  async talk(exchange: () => Promise<void>, settled: () => void): Promise<void> {
    try {
      await exchange();
    } catch (error) {
      this.#failed(error);
    } finally {
      settled();
    }
    this.#options.changed();
  }

  /** No heartbeat from now on. */
  close(): void {
    this.#closed = true;
    clearInterval(this.#heartbeat);
  }

  /** This replica as the shared ledger's quorum knows it (src/upstream-guard/shared-ledger.ts). */
  #caller(role: RegisterRole): RegisterCaller {
    return { id: this.#options.id, role, epoch: this.#contact.epoch, expectedReplicas: this.#options.replicas() };
  }

  /** The heartbeat: the epoch read (a new one, or a rejoin, registers this replica's slots). */
  async #beat(): Promise<void> {
    if (this.#beating || this.#closed) return;
    this.#beating = true;
    await this.talk(
      async () => {
        // On its share: a probe first, so that no slot waits on a rejoin Redis cannot answer.
        const rejoining = this.#contact.rejoining;
        const view = await this.#ledger.register([], false, this.#caller(rejoining ? 'probe' : 'beat'));
        this.#contact.answered(this.#options.now(), view.openInMs);
        if (rejoining) await this.register(true);
        else if (view.epoch !== this.#contact.epoch) await this.register(false);
      },
      () => {
        this.#beating = false;
      },
    );
  }

  #failed(error: unknown): void {
    this.#contact.failed();
    this.#options.onRedisFailure?.(error);
  }
}
