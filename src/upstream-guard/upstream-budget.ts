/**
 * The upstream budget (docs/limits.md#the-upstream-budget): at most `upstream.maxConcurrent` requests in flight and
 * `upstream.maxPerSecond` started in any one second, for all replicas together, so the proxy's
 * misses never push the system of record over its own limit; with the bound stated for each way
 * Redis can fail, and kept through them (docs/architecture.md#the-upstream-budget).
 *
 * Two rooms, the mode (`src/upstream-guard/budget-mode.ts`) the seam between them: the conversation with
 * the shared ledger in Redis (`src/upstream-guard/budget-conversation.ts`: heartbeat, epochs, registration,
 * failures), and the supply of slots to the waiting requests from the ledger the mode names
 * (`src/upstream-guard/slot-supply.ts`). The budget asks the conversation for the mode, and is told when
 * an exchange has settled: it then tells whoever waits on the mode, and supplies slots again.
 *
 * Requests wait in a line of their own (`SlotWaiters`): one that gives up consumes nothing.
 */
import { randomUUID } from 'node:crypto';
import type { RedisClient } from '../platform/redis/connection.js';
import { BudgetConversation } from './budget-conversation.js';
import type { BudgetMode } from './budget-mode.js';
import { type BudgetLimits, SlotLedger, spacingMs } from './slot-ledger.js';
import { SlotSupply } from './slot-supply.js';
import { SlotWaiters, type SparePromotion } from './slot-waiters.js';

export { HEARTBEAT_MS, HOLD_MARGIN_MS, REJOIN_MS } from './budget-conversation.js';

export type BudgetResult<T> = { readonly kind: 'ran'; readonly value: T } | { readonly kind: 'refused' };

export interface UpstreamBudgetOptions extends BudgetLimits {
  /** The replicas assumed until they have been counted (`rateLimit.replicas`). */
  readonly replicas: number;
  /** The replicas counted through Redis, when they have been: the local share follows them. */
  readonly liveReplicas?: (() => number | undefined) | undefined;
  /** How long an upstream exchange may take at most, ms (its deadline). */
  readonly holdMs: number;
  /**
   * Cut off from the shared ledger: `share` (default) keeps to this replica's share at once; `wait`
   * starts nothing until every slot it granted must be over (docs/limits.md#the-upstream-budget).
   */
  readonly cutOff?: 'wait' | 'share';
  readonly redis?:
    | {
        /** The budget's own connection. */
        readonly client: RedisClient;
        readonly prefix: string;
        /** That connection's command timeout, ms: part of how long an unanswered call can take. */
        readonly commandTimeoutMs: number;
      }
    | undefined;
  readonly now?: () => number;
  /** Slots per turn of the companies named, in the line of waiting requests (every other: 1). */
  readonly companyWeights?: Readonly<Record<string, number>> | undefined;
  /** Told of each failed call to the shared ledger, for the metrics and the debug log. */
  readonly onRedisFailure?: (error: unknown) => void;
}

const REFUSED = { kind: 'refused' } as const;

export class UpstreamBudget {
  #limits: BudgetLimits;
  /** Company → slots per turn in the line (`upstream.companyWeights`); every other company 1. */
  #weights: Readonly<Record<string, number>>;
  readonly #now: () => number;
  readonly #waiters: SlotWaiters;
  /** None without Redis: slots then come from this replica's share alone. */
  readonly #conversation: BudgetConversation | undefined;
  readonly #supply: SlotSupply;
  readonly #modeListeners = new Set<() => void>();

  constructor(options: UpstreamBudgetOptions) {
    this.#limits = { maxConcurrent: options.maxConcurrent, maxPerSecond: options.maxPerSecond };
    const replicas = (): number => Math.max(1, options.liveReplicas?.() ?? options.replicas);
    const now = options.now ?? Date.now;
    this.#now = now;
    this.#weights = options.companyWeights ?? {};
    // A prefetch may take a slot paced one spacing ahead: two fetches that start together are
    // spaced by the rate, and the second is no less a slot to spare (docs/cache.md#prefetch).
    this.#waiters = new SlotWaiters(
      now,
      () => spacingMs(this.#limits),
      (company) => this.#weights[company] ?? 1,
    );
    // This replica's own slots count until they are released: it knows when its exchanges end.
    const own = new SlotLedger(Number.POSITIVE_INFINITY);
    // This replica's id in the shared ledger, and the prefix of its slots' ids there.
    const id = randomUUID().slice(0, 12);
    // Told once an exchange with the shared ledger has settled or a planned wake comes: never
    // before this constructor has returned (the first heartbeat's answer comes later).
    const changed = (): void => this.#changed();
    this.#conversation =
      options.redis &&
      new BudgetConversation({
        redis: options.redis,
        deadlineMs: options.holdMs,
        cutOff: options.cutOff ?? 'share',
        id,
        replicas,
        now,
        holds: (at) => own.holds(at),
        changed,
        onRedisFailure: options.onRedisFailure,
      });
    const limits = (): BudgetLimits => this.#limits;
    const share = (): BudgetLimits => shareOf(this.#limits, replicas());
    this.#supply = new SlotSupply({
      own,
      waiters: this.#waiters,
      conversation: this.#conversation,
      id,
      limits,
      share,
      now,
      changed,
    });
  }

  /** Where slots come from now. */
  mode(): BudgetMode {
    return this.#supply.mode();
  }

  /**
   * Runs `job` in a slot, or refuses when none comes within `maxWaitMs`; `company`: whose request
   * it is (the line serves companies in turn: src/upstream-guard/fair-line.ts).
   */
  async run<T>(job: () => Promise<T>, maxWaitMs: number, company = ''): Promise<BudgetResult<T>> {
    const deadline = this.#now() + maxWaitMs;
    for (;;) {
      const left = deadline - this.#now();
      if (this.#supply.closed || left <= 0) return REFUSED;
      const waiting = this.#waiters.wait(left, company);
      this.#supply.pump();
      const slot = await waiting;
      if (slot === undefined) return REFUSED;
      const early = slot.startAt - this.#now();
      if (early > 0) await new Promise((resolve) => setTimeout(resolve, early));
      // Started later than its start was due and the allowance: the rate would not hold at the
      // upstream. The slot goes back unused (its start stays counted), and the request waits again.
      if (this.#now() > slot.startBy) {
        this.#supply.release(slot);
        continue;
      }
      try {
        return { kind: 'ran', value: await job() };
      } finally {
        this.#supply.release(slot);
      }
    }
  }

  /**
   * Runs `job` in a slot the budget has to spare now, or refuses at once (a prefetch's way):
   * refused while any request of this replica waits for a slot, and given a slot only when no
   * request waits and the slot can start at once, within `maxWaitMs` (the ledger's answer);
   * `promotion` makes it a request's wait once a client's request joins it.
   */
  async runSpare<T>(
    job: () => Promise<T>,
    maxWaitMs: number,
    promotion?: SparePromotion,
    company = '',
  ): Promise<BudgetResult<T>> {
    if (this.#supply.closed || this.#waiters.requests > 0) return REFUSED;
    const waiting = this.#waiters.waitSpare(
      maxWaitMs,
      promotion && {
        waitMs: promotion.waitMs,
        // Promoted, it may take a slot whose start is still to come: look for one now.
        whenPromoted: (promote) =>
          promotion.whenPromoted(() => {
            promote();
            this.#supply.pump();
          }),
      },
      company,
    );
    this.#supply.pump();
    const slot = await waiting;
    if (slot === undefined) return REFUSED;
    const early = slot.startAt - this.#now();
    if (early > 0) await new Promise((resolve) => setTimeout(resolve, early));
    try {
      return { kind: 'ran', value: await job() };
    } finally {
      this.#supply.release(slot);
    }
  }

  /** New company weights (a reloaded config, an operator's change), for the turns from now on. */
  weigh(companyWeights: Readonly<Record<string, number>>): void {
    this.#weights = companyWeights;
  }

  /** The company weights in force (every company not named weighs 1). */
  weights(): Readonly<Record<string, number>> {
    return this.#weights;
  }

  /** New limits (a reloaded config), for this replica's calls from now on. */
  apply(settings: BudgetLimits): void {
    this.#limits = { maxConcurrent: settings.maxConcurrent, maxPerSecond: settings.maxPerSecond };
    this.#supply.pump();
  }

  /**
   * Resolves `true` once slots come from the shared ledger, or `false` after `maxWaitMs` (at once
   * without Redis). A start waits for it before it takes requests.
   */
  whenShared(maxWaitMs: number): Promise<boolean> {
    if (this.#conversation === undefined) return Promise.resolve(false);
    return this.whenMode('shared', maxWaitMs);
  }

  /** Resolves `true` once the mode is `mode` (checked at every heartbeat and change), or `false` after `maxWaitMs`. */
  whenMode(mode: BudgetMode, maxWaitMs: number): Promise<boolean> {
    return new Promise<boolean>((resolve) => {
      const check = (): void => {
        if (this.mode() === mode) done(true);
        else if (mode === 'shared' && this.mode() === 'closed') this.#supply.wakeAtOpening();
      };
      const done = (reached: boolean): void => {
        clearTimeout(timer);
        this.#modeListeners.delete(check);
        resolve(reached);
      };
      const timer = setTimeout(() => done(false), Math.max(0, maxWaitMs));
      timer.unref();
      this.#modeListeners.add(check);
      check();
    });
  }

  close(): void {
    this.#supply.close();
    this.#conversation?.close();
    this.#waiters.refuseAll();
  }

  /** The mode may have changed: whoever waits on it is told, and slots are supplied again. */
  #changed(): void {
    for (const listener of [...this.#modeListeners]) listener();
    this.#supply.pump();
  }
}

/** One replica's share of `limits`, of `replicas` (at least one slot, and one start a second). */
function shareOf(limits: BudgetLimits, replicas: number): BudgetLimits {
  return {
    maxConcurrent: Math.max(1, Math.floor(limits.maxConcurrent / replicas)),
    maxPerSecond: Math.max(1, Math.floor(limits.maxPerSecond / replicas)),
  };
}

export function createUpstreamBudget(options: UpstreamBudgetOptions): UpstreamBudget {
  return new UpstreamBudget(options);
}
