/**
 * Whether this replica has heard every change the fleet announced (docs/cache.md#the-l1): the L1's
 * source of truth. Each purge and invalidation is announced on the purge bus with the next number
 * of one sequence kept in Redis (purge-bus.ts); this replica notes the numbers it hears, and asks
 * Redis for the last number given out every `intervalMs` (its heartbeat, with the id of the Redis
 * process that keeps it). While every number given out has been heard, the L1's copies serve for
 * as long as their pages are fresh, with no confirmation against Redis; a gap makes the L1 confirm
 * what it holds before it serves it again:
 *
 * - `skipped`: a number heard that is not the next one (the ones between were lost);
 * - `missed`:  a number given out at one heartbeat and still not heard at the next;
 * - `regressed`: a last number lower than one heard (the key was lost: a flush, an eviction);
 * - `failover`: another Redis process keeps the sequence (a failover or a restart can lose the
 *   last numbers given out with their announcements, so that the next ones look contiguous), or
 *   the sequence was begun anew (its keys lost: a flush, an eviction, before any number was given).
 *
 * A heartbeat that fails leaves the L1 without a verdict: its copies serve for their L1 lifetime
 * and are confirmed before it runs out, as if no channel existed, until a heartbeat answers again.
 * While there is no verdict (the first heartbeat, sent before Redis may be reachable, or one that
 * failed) the next is sent after `retryMs`, not a whole interval later: a replica started with a
 * long L1 lifetime is vouched for as soon as Redis answers. So a change whose announcement is lost
 * is noticed within two heartbeats, and `intervalMs` is a quarter of `cache.l1.ttl`: no copy serves
 * past a change longer than it would if each were confirmed every L1 lifetime.
 */

import type { ChannelGapLabel } from '../../observability/metrics.js';

/** The time before the next heartbeat while there is no verdict, unless told otherwise, ms. */
const DEFAULT_RETRY_MS = 250;

/** Why the channel cannot vouch for what was set before now (the list above). */
export type ChannelGap = ChannelGapLabel;

/** The L1's side of the channel (src/cache/stores/l1.ts). */
export interface ChannelListener {
  /** True while every change announced since the last gap was heard; false while that is not known. */
  tell(told: boolean): void;
  /** A change may have been missed: what was set before now is confirmed before it serves again. */
  distrust(): void;
}

/** The sequence's last number given out (0 before the first), and who keeps it: process and epoch. */
export interface SequenceReading {
  readonly last: number;
  readonly keeper: string;
}

export interface ChangeChannelOptions {
  /** Reads the sequence in Redis; rejects when Redis does not answer. */
  readonly read: () => Promise<SequenceReading>;
  readonly listener: ChannelListener;
  readonly intervalMs: number;
  /** The time before the next heartbeat while there is no verdict; the interval's if shorter. */
  readonly retryMs?: number | undefined;
  /** Told of each gap, for the metrics and logs. */
  readonly onGap?: ((gap: ChannelGap) => void) | undefined;
  /** Told of each change of verdict. */
  readonly onTold?: ((told: boolean) => void) | undefined;
}

export class ChangeChannel {
  readonly #options: ChangeChannelOptions;
  /** The last number heard in order; `undefined` until the first heartbeat answers. */
  #lastHeard: number | undefined;
  /** The highest number heard before the first heartbeat answered. */
  #heardEarly = 0;
  /** The process keeping the sequence at the last heartbeat. */
  #keeper: string | undefined;
  /** A number given out by the last heartbeat and not heard then: a gap if still not heard at the next. */
  #pending: number | undefined;
  #told = false;
  #beating = false;
  #timer: NodeJS.Timeout | undefined;
  #closed = false;

  constructor(options: ChangeChannelOptions) {
    if (!(options.intervalMs > 0)) throw new TypeError('the change channel heartbeat must be positive');
    if (options.retryMs !== undefined && !(options.retryMs > 0))
      throw new TypeError('the change channel retry must be positive');
    this.#options = options;
    void this.#tick();
  }

  /** Whether the channel vouches for the L1 now. */
  get told(): boolean {
    return this.#told;
  }

  /** A number heard on the bus (each announcement carries one). */
  heard(number: number): void {
    const last = this.#lastHeard;
    if (last === undefined) {
      this.#heardEarly = Math.max(this.#heardEarly, number);
      return;
    }
    if (number <= last) return; // late, or heard again: nothing new
    if (number > last + 1) this.#gap('skipped');
    this.#lastHeard = number;
  }

  /** One heartbeat: the sequence read, and judged against what was heard. Exposed for tests. */
  async beat(): Promise<void> {
    if (this.#beating) return;
    this.#beating = true;
    try {
      const reading = await this.#options.read().catch(() => undefined);
      if (reading === undefined) this.#setTold(false);
      else this.#judge(reading);
    } finally {
      this.#beating = false;
    }
  }

  close(): void {
    this.#closed = true;
    clearTimeout(this.#timer);
  }

  /** A heartbeat, then the next one: an interval on while told, `retryMs` on while not. */
  async #tick(): Promise<void> {
    await this.beat();
    if (this.#closed) return;
    const { intervalMs, retryMs = DEFAULT_RETRY_MS } = this.#options;
    this.#timer = setTimeout(() => void this.#tick(), this.#told ? intervalMs : Math.min(intervalMs, retryMs));
    this.#timer.unref();
  }

  #judge({ last, keeper }: SequenceReading): void {
    const heard = this.#lastHeard;
    if (heard === undefined || keeper !== this.#keeper) {
      // The numbers given out before this one cannot be checked: what was read before is confirmed.
      if (heard === undefined) this.#options.listener.distrust();
      else this.#gap('failover');
      this.#keeper = keeper;
      this.#lastHeard = Math.max(last, heard ?? this.#heardEarly);
      this.#pending = undefined;
      this.#setTold(true);
      return;
    }
    if (last < heard) {
      this.#gap('regressed');
      this.#lastHeard = last;
    } else if (last > heard) {
      if (this.#pending === undefined || this.#pending <= heard) {
        // Given out since the last heartbeat: its announcement may still be on its way.
        this.#pending = last;
        return;
      }
      this.#gap('missed');
      this.#lastHeard = last;
    }
    this.#pending = undefined;
    this.#setTold(true);
  }

  #gap(gap: ChannelGap): void {
    this.#options.listener.distrust();
    this.#options.onGap?.(gap);
  }

  #setTold(told: boolean): void {
    if (told === this.#told) return;
    this.#told = told;
    this.#options.listener.tell(told);
    this.#options.onTold?.(told);
  }
}
