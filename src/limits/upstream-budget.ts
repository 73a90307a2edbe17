/**
 * The upstream budget (docs/limits.md#the-upstream-budget): at most `upstream.maxConcurrent` requests in flight and
 * `upstream.maxPerSecond` started in any one second, for all replicas together, so the proxy's
 * misses never push the system of record over its own limit; with the bound stated for each way
 * Redis can fail, and kept through them (docs/architecture.md#the-upstream-budget).
 *
 * Slots come from the ledger of `src/limits/budget-mode.ts`'s mode: the shared one in Redis
 * (`src/limits/shared-ledger.ts`), none while cut off from it, or this replica's share of the
 * limits (`src/limits/slot-ledger.ts`) once every slot the shared one granted must be over. The
 * local ledger also counts every slot this replica holds from the shared one, so a share never
 * comes on top of them, and a rejoin registers them all in Redis.
 *
 * Requests wait in a line of their own (`SlotWaiters`): one that gives up consumes nothing.
 */
import { randomUUID } from 'node:crypto';
import type { RedisClient } from '../platform/redis.js';
import { BudgetContact, type BudgetMode } from './budget-mode.js';
import { type RegisterCaller, type RegisterRole, type SharedAttempt, SharedLedger } from './shared-ledger.js';
import { type BudgetLimits, SEND_BY_MS, SlotLedger, spacingMs } from './slot-ledger.js';
import { type Slot, SlotWaiters, type SparePromotion } from './slot-waiters.js';

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

/** A slot counts in a ledger this much longer than the exchange's deadline (timers run late). */
export const HOLD_MARGIN_MS = 2_000;
/** How often each replica asks the shared ledger for its epoch, ms. */
export const HEARTBEAT_MS = 250;
/**
 * How long grants stay closed after a new epoch or a rejoin, ms: longer than a replica that can
 * reach Redis takes to hear of it and register its slots: a heartbeat (250 ms), a command's timeout
 * (250 ms), a reconnection attempt (at most 500 ms: src/platform/redis.ts) and, on a cluster, the
 * periodic refresh of the slot map that finds a promoted master (1 s).
 */
export const REJOIN_MS = 2_000;
/** How soon a request waiting for a slot released elsewhere asks the shared ledger again, ms. */
const POLL_MS = 20;
/** How often requests waiting while grants are closed ask whether they opened early, ms. */
const CLOSED_POLL_MS = 50;
/** Slots asked for in one call at most. */
const MAX_BATCH = 16;

const REFUSED = { kind: 'refused' } as const;

export class UpstreamBudget {
  #limits: BudgetLimits;
  /** Company → slots per turn in the line (`upstream.companyWeights`); every other company 1. */
  #weights: Readonly<Record<string, number>>;
  readonly #replicas: () => number;
  readonly #now: () => number;
  readonly #own: SlotLedger;
  readonly #shared: SharedLedger | undefined;
  readonly #contact: BudgetContact;
  readonly #waiters: SlotWaiters;
  /** This replica's slots that the shared ledger counts (granted there, or registered). */
  readonly #inShared = new Set<string>();
  readonly #onRedisFailure: ((error: unknown) => void) | undefined;
  readonly #heartbeat: NodeJS.Timeout | undefined;
  readonly #idPrefix = randomUUID().slice(0, 12);
  #nextId = 0;
  #asking = false;
  #beating = false;
  /** This replica's slots are being registered: none is taken from its share meanwhile. */
  #registering = false;
  #wake: { readonly at: number; readonly timer: NodeJS.Timeout } | undefined;
  /** When this replica last asked the shared ledger while its grants were closed. */
  #lastClosedAsk = Number.NEGATIVE_INFINITY;
  #closed = false;
  readonly #modeListeners = new Set<() => void>();

  constructor(options: UpstreamBudgetOptions) {
    this.#limits = { maxConcurrent: options.maxConcurrent, maxPerSecond: options.maxPerSecond };
    this.#replicas = () => Math.max(1, options.liveReplicas?.() ?? options.replicas);
    this.#now = options.now ?? Date.now;
    // A prefetch may take a slot paced one spacing ahead: two fetches that start together are
    // spaced by the rate, and the second is no less a slot to spare (docs/cache.md#prefetch).
    this.#weights = options.companyWeights ?? {};
    this.#waiters = new SlotWaiters(
      this.#now,
      () => spacingMs(this.#limits),
      (company) => this.#weights[company] ?? 1,
    );
    const holdMs = options.holdMs + HOLD_MARGIN_MS;
    // This replica's own slots count until they are released: it knows when its exchanges end.
    this.#own = new SlotLedger(Number.POSITIVE_INFINITY);
    this.#onRedisFailure = options.onRedisFailure;
    const redis = options.redis;
    // Past this, every slot the shared ledger granted before it stopped answering is over: its
    // exchange ended by its deadline, and its hold expired. The last answer came at most a
    // heartbeat and a command before the ledger stopped answering anyone.
    const fallbackAfterMs =
      (options.cutOff ?? 'share') === 'share' ? 0 : holdMs + HEARTBEAT_MS + (redis?.commandTimeoutMs ?? 0);
    this.#contact = new BudgetContact(fallbackAfterMs, this.#now());
    if (redis === undefined) {
      this.#shared = undefined;
      this.#heartbeat = undefined;
      return;
    }
    this.#shared = new SharedLedger({
      client: redis.client,
      prefix: redis.prefix,
      holdMs,
      rejoinMs: REJOIN_MS,
      newEpoch: () => randomUUID(),
    });
    this.#heartbeat = setInterval(() => void this.#beat(), HEARTBEAT_MS);
    this.#heartbeat.unref();
    void this.#beat();
  }

  /** Where slots come from now. */
  mode(): BudgetMode {
    return this.#shared === undefined ? 'local' : this.#contact.mode(this.#now());
  }

  /**
   * Runs `job` in a slot, or refuses when none comes within `maxWaitMs`; `company`: whose request
   * it is (the line serves companies in turn: src/limits/fair-line.ts).
   */
  async run<T>(job: () => Promise<T>, maxWaitMs: number, company = ''): Promise<BudgetResult<T>> {
    const deadline = this.#now() + maxWaitMs;
    for (;;) {
      const left = deadline - this.#now();
      if (this.#closed || left <= 0) return REFUSED;
      const waiting = this.#waiters.wait(left, company);
      this.#pump();
      const slot = await waiting;
      if (slot === undefined) return REFUSED;
      const early = slot.startAt - this.#now();
      if (early > 0) await new Promise((resolve) => setTimeout(resolve, early));
      // Started later than its start was due and the allowance: the rate would not hold at the
      // upstream. The slot goes back unused (its start stays counted), and the request waits again.
      if (this.#now() > slot.startBy) {
        this.#release(slot);
        continue;
      }
      try {
        return { kind: 'ran', value: await job() };
      } finally {
        this.#release(slot);
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
    if (this.#closed || this.#waiters.requests > 0) return REFUSED;
    const waiting = this.#waiters.waitSpare(
      maxWaitMs,
      promotion && {
        waitMs: promotion.waitMs,
        // Promoted, it may take a slot whose start is still to come: look for one now.
        whenPromoted: (promote) =>
          promotion.whenPromoted(() => {
            promote();
            this.#pump();
          }),
      },
      company,
    );
    this.#pump();
    const slot = await waiting;
    if (slot === undefined) return REFUSED;
    const early = slot.startAt - this.#now();
    if (early > 0) await new Promise((resolve) => setTimeout(resolve, early));
    try {
      return { kind: 'ran', value: await job() };
    } finally {
      this.#release(slot);
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
    this.#pump();
  }

  /**
   * Resolves `true` once slots come from the shared ledger, or `false` after `maxWaitMs` (at once
   * without Redis). A start waits for it before it takes requests.
   */
  whenShared(maxWaitMs: number): Promise<boolean> {
    if (this.#shared === undefined) return Promise.resolve(false);
    return this.whenMode('shared', maxWaitMs);
  }

  /** Resolves `true` once the mode is `mode` (checked at every heartbeat and change), or `false` after `maxWaitMs`. */
  whenMode(mode: BudgetMode, maxWaitMs: number): Promise<boolean> {
    return new Promise<boolean>((resolve) => {
      const check = (): void => {
        if (this.mode() === mode) done(true);
        else if (mode === 'shared' && this.mode() === 'closed') this.#wakeAt(this.#contact.openAt);
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
    this.#closed = true;
    if (this.#heartbeat !== undefined) clearInterval(this.#heartbeat);
    if (this.#wake !== undefined) clearTimeout(this.#wake.timer);
    this.#waiters.refuseAll();
  }

  #share(): BudgetLimits {
    const replicas = this.#replicas();
    return {
      maxConcurrent: Math.max(1, Math.floor(this.#limits.maxConcurrent / replicas)),
      maxPerSecond: Math.max(1, Math.floor(this.#limits.maxPerSecond / replicas)),
    };
  }

  /** This replica as the shared ledger's quorum knows it (src/limits/shared-ledger.ts). */
  #caller(role: RegisterRole): RegisterCaller {
    return {
      id: this.#idPrefix,
      role,
      epoch: this.#contact.epoch,
      expectedReplicas: this.#replicas(),
    };
  }

  #ids(count: number): string[] {
    return Array.from({ length: Math.min(count, MAX_BATCH) }, () => `${this.#idPrefix}:${String(this.#nextId++)}`);
  }

  /** Hands slots to the waiting requests from the ledger the mode names, or plans when to try. */
  #pump(): void {
    if (this.#closed || this.#waiters.size === 0) return;
    const now = this.#now();
    const mode = this.mode();
    if (mode === 'local') return this.#grantLocally(now);
    if (mode === 'rejoining') return void this.#grantRejoining(now);
    if (mode === 'cut-off') return this.#wakeAt(this.#contact.fallbackAt);
    // Closed: grants open at `openAt`, or sooner once every replica has registered (the ledger's
    // quorum), which asking tells.
    if (mode === 'closed') return this.#pollClosed(now);
    void this.#askShared();
  }

  #grantLocally(now: number): void {
    // A slot taken while this replica's slots are being registered would miss the registration,
    // and the ledger, once its quorum opens grants, would not count it: the answer pumps again.
    if (this.#registering) return;
    const ids = this.#ids(this.#waiters.size);
    const result = this.#own.grant(now, ids, this.#share());
    if (result.kind === 'full') {
      if (result.retryInMs !== undefined) this.#wakeAt(now + result.retryInMs);
      return; // else a release pumps again
    }
    if (this.#shared !== undefined) this.#contact.tookShare();
    for (const [i, startsIn] of result.startsInMs.entries()) this.#hand(ids[i] ?? '', now + startsIn, now + startsIn);
  }

  /**
   * Rejoining: a slot from this replica's share, registered in the shared ledger before it is
   * used, so that the ledger counts it once grants open for everyone. Once they are open (the
   * quorum can open them before this replica hears of it), the ledger registers nothing: the slot
   * goes back unused, and the request asks the ledger like any other.
   */
  async #grantRejoining(now: number): Promise<void> {
    const shared = this.#shared;
    if (shared === undefined || this.#asking) return;
    const ids = this.#ids(this.#waiters.size);
    const result = this.#own.grant(now, ids, this.#share());
    if (result.kind === 'full') {
      if (result.retryInMs !== undefined) this.#wakeAt(now + result.retryInMs);
      return; // else a release pumps again
    }
    const granted = result.startsInMs.map((startsIn, i) => ({ id: ids[i] ?? '', startsIn }));
    this.#asking = true;
    await this.#talk(
      async () => {
        let registered = false;
        try {
          const view = await shared.register(
            granted.map(({ id, startsIn }) => ({ id, ageMs: -startsIn })),
            false,
            this.#caller('share'),
          );
          this.#contact.answered(this.#now(), view.openInMs);
          registered = view.registered;
        } finally {
          // Never used unless registered.
          if (!registered) for (const { id } of granted) this.#own.release(id);
        }
        if (!registered) return;
        for (const { id, startsIn } of granted) {
          this.#inShared.add(id);
          this.#hand(id, now + startsIn, now + startsIn);
        }
      },
      () => {
        this.#asking = false;
      },
    );
  }

  /** Requests wait while grants are closed: asks again every `CLOSED_POLL_MS`, for an early opening. */
  #pollClosed(now: number): void {
    if (this.#asking) return;
    if (this.#lastClosedAsk + CLOSED_POLL_MS <= now) {
      this.#lastClosedAsk = now;
      void this.#askShared();
      return;
    }
    this.#wakeAt(Math.min(this.#contact.openAt, this.#lastClosedAsk + CLOSED_POLL_MS));
  }

  /**
   * Gives a granted slot to the longest waiting request (or back, when nobody waits). Its start
   * is due between `dueFrom` and `dueTo` on this clock (a shared grant's, somewhere within the
   * call's round trip): it starts no earlier than the one, and is sent no later than `SEND_BY_MS`
   * after the other (src/limits/slot-ledger.ts).
   */
  #hand(id: string, dueFrom: number, dueTo: number): void {
    const slot = { id, startAt: dueTo, startBy: dueFrom + SEND_BY_MS };
    if (!this.#waiters.hand(slot)) this.#release(slot);
  }

  async #askShared(): Promise<void> {
    const shared = this.#shared;
    if (shared === undefined || this.#asking) return;
    this.#asking = true;
    const ids = this.#ids(this.#waiters.size);
    const askedAt = this.#now();
    await this.#talk(
      async () => this.#answered(await shared.acquire(this.#contact.epoch, ids, this.#limits), ids, askedAt),
      () => {
        this.#asking = false;
      },
    );
  }

  /** The shared ledger's answer to `ids`, asked for at `askedAt`. */
  async #answered(attempt: SharedAttempt, ids: readonly string[], askedAt: number): Promise<void> {
    const now = this.#now();
    this.#contact.answered(now, attempt.openInMs);
    switch (attempt.kind) {
      case 'granted':
        for (const [i, startsIn] of attempt.startsInMs.entries()) {
          const id = ids[i] ?? '';
          this.#own.record(id, now + startsIn, now);
          this.#inShared.add(id);
          this.#hand(id, askedAt + startsIn, now + startsIn);
        }
        return;
      case 'full':
        return this.#wakeAt(now + (attempt.retryInMs ?? POLL_MS));
      case 'closed':
        return this.#wakeAt(Math.min(this.#contact.openAt, now + CLOSED_POLL_MS));
      case 'epoch':
        return this.#register(false);
    }
  }

  /**
   * One exchange with the shared ledger: a failure is this replica's news that it is cut off; the
   * mode is told to whoever waits on it, and the waiting requests are served from where it says.
   */
  async #talk(exchange: () => Promise<void>, settled: () => void): Promise<void> {
    try {
      await exchange();
    } catch (error) {
      this.#failed(error);
    } finally {
      settled();
    }
    this.#notifyMode();
    this.#pump();
  }

  /**
   * Registers every slot this replica holds in the shared ledger's current epoch; no slot is taken
   * from its share meanwhile (`#grantLocally`). Called once the ledger has just answered, so the
   * pause is a round trip.
   */
  async #register(close: boolean): Promise<void> {
    const shared = this.#shared;
    if (shared === undefined) return;
    const now = this.#now();
    const holds = this.#own.holds(now);
    this.#registering = true;
    try {
      const view = await shared.register(holds, close, this.#caller('register'));
      this.#contact.answered(this.#now(), view.openInMs);
      for (const { id } of holds) this.#inShared.add(id);
      this.#contact.registered(view.epoch, close);
    } finally {
      this.#registering = false;
    }
  }

  /** The heartbeat: the epoch read (a new one, or a rejoin, registers this replica's slots). */
  async #beat(): Promise<void> {
    const shared = this.#shared;
    if (shared === undefined || this.#beating || this.#closed) return;
    this.#beating = true;
    await this.#talk(
      async () => {
        // On its share: a probe first, so that no slot waits on a rejoin Redis cannot answer.
        const rejoining = this.#contact.rejoining;
        const view = await shared.register([], false, this.#caller(rejoining ? 'probe' : 'beat'));
        this.#contact.answered(this.#now(), view.openInMs);
        if (rejoining) await this.#register(true);
        else if (view.epoch !== this.#contact.epoch) await this.#register(false);
      },
      () => {
        this.#beating = false;
      },
    );
  }

  #failed(error: unknown): void {
    this.#contact.failed();
    this.#onRedisFailure?.(error);
  }

  #release(slot: Slot): void {
    this.#own.release(slot.id);
    if (this.#inShared.delete(slot.id)) {
      this.#shared?.release([slot.id]).catch((error: unknown) => this.#failed(error)); // it expires anyway
    }
    this.#pump();
  }

  /** Pumps again at `at` (this replica's clock), unless an earlier wake is planned. */
  #wakeAt(at: number): void {
    if (this.#closed) return;
    if (this.#wake !== undefined && this.#wake.at <= at) return;
    if (this.#wake !== undefined) clearTimeout(this.#wake.timer);
    const timer = setTimeout(
      () => {
        this.#wake = undefined;
        this.#notifyMode();
        this.#pump();
      },
      Math.max(0, at - this.#now()),
    );
    timer.unref();
    this.#wake = { at, timer };
  }

  #notifyMode(): void {
    for (const listener of [...this.#modeListeners]) listener();
  }
}

export function createUpstreamBudget(options: UpstreamBudgetOptions): UpstreamBudget {
  return new UpstreamBudget(options);
}
