/**
 * Keeps this replica's copy of the operator state in step with Redis (the how and why are in
 * operator-control.ts): a change made here is shared by one script, or stays pending; announced
 * changes are applied as they come; and a check compares Redis's meta with the state last matched,
 * writes back what Redis lacks and reads when anything differs.
 */
import { randomUUID } from 'node:crypto';
import type { RedisClient } from '../platform/redis/connection.js';
import { Confirmation } from './confirmation.js';
import type { ChangeResult, ControlStore, StateMeta } from './control-store.js';
import type { LocalCopy } from './local-copy.js';
import type { StateEntry } from './operator-state.js';
import { PendingChanges } from './pending-changes.js';
import { SharedVersion } from './shared-version.js';
import { SyncLoop } from './sync-loop.js';

export interface StateSyncOptions {
  readonly store: ControlStore;
  readonly local: LocalCopy;
  readonly now: () => number;
  readonly onError: ((error: unknown) => void) | undefined;
  readonly syncIntervalMs: number;
  /** How old an incarnation must be before a read of it confirms this replica's state, ms. */
  readonly settleMs: number;
  /** The connection is up. */
  readonly ready: () => boolean;
}

export class StateSync {
  readonly confirmation: Confirmation;
  readonly #store: ControlStore;
  readonly #local: LocalCopy;
  readonly #now: () => number;
  readonly #onError: ((error: unknown) => void) | undefined;
  readonly #version: SharedVersion;
  readonly #pending: PendingChanges;
  readonly #loop: SyncLoop;

  constructor(options: StateSyncOptions) {
    this.#store = options.store;
    this.#local = options.local;
    this.#now = options.now;
    this.#onError = options.onError;
    this.confirmation = new Confirmation(options.settleMs);
    this.#version = new SharedVersion(options.now());
    this.#pending = new PendingChanges(options.local.state);
    this.#loop = new SyncLoop(() => this.#check(), {
      intervalMs: options.syncIntervalMs,
      ready: options.ready,
      onError: options.onError,
    });
  }

  /** Checks the shared state now (or once more after the running check). Never rejects. */
  sync(): Promise<void> {
    return this.#loop.run();
  }

  /** Since this copy was last confirmed against Redis, ms. */
  ageMs(): number {
    return this.#version.ageMs(this.#now());
  }

  /**
   * Writes a change already applied here to Redis: `true` once Redis has it, `false` when Redis
   * failed (it stays pending). Never rejects.
   */
  async share(field: string, local: StateEntry): Promise<boolean> {
    this.#pending.add(field);
    try {
      const result = await this.#store.change(field, local.v, local.x);
      if (result.kind === 'lost') {
        await this.sync(); // writes everything back, this change included
        return !this.#pending.has(field);
      }
      this.#taken(field, local, result);
      return true;
    } catch (error) {
      this.#onError?.(error);
      return false; // still pending: the next check that reaches Redis writes it
    }
  }

  /** Applies the announced changes on `subscriber`, and checks when it comes back. */
  follow(subscriber: RedisClient): void {
    const channel = this.#store.channel;
    subscriber.on('message', (from: string, text: string) => {
      if (from === channel) this.#receive(text);
    });
    // Messages sent while the subscription was down are lost: check at once when it is back.
    subscriber.on('ready', () => void this.sync());
    subscriber.subscribe(channel).catch((error: unknown) => this.#onError?.(error));
  }

  /** Drops the expired entries in Redis too. */
  prune(): void {
    this.#store.prune().catch((error: unknown) => this.#onError?.(error));
  }

  close(): void {
    this.#loop.close();
  }

  #taken(field: string, local: StateEntry, result: Extract<ChangeResult, { kind: 'ok' }>): void {
    this.#pending.taken(field, local);
    // Redis's stamp replaces this clock's, so that every copy holds the very same entry.
    if (this.#local.state.get(field) === local) this.#local.restamp(field, result.entry);
    // A `rev` this copy had passed: Redis lost changes and is counting the same numbers again.
    if (this.#version.has(result.incarnation, result.rev)) this.#version.sawRedisBehind();
    if (!this.#version.advance(result.incarnation, result.rev)) void this.sync();
  }

  #receive(text: string): void {
    const message = this.#store.parseMessage(text);
    if (message === undefined) return;
    const { incarnation, rev, field, entry } = message;
    if (this.#version.has(incarnation, rev)) {
      // Already applied (this replica's own change, or read) — unless the change is news here: then
      // Redis lost changes and counted this one with a number this copy had passed. It is applied,
      // and the check writes back everything and moves `rev` past what this copy saw.
      if (field === undefined || entry === undefined || !this.#local.isNews(field, entry)) return;
      this.#local.apply([[field, entry]]);
      this.#version.sawRedisBehind();
      void this.sync();
      return;
    }
    if (field !== undefined && entry !== undefined && this.#version.isNext(incarnation, rev)) {
      this.#local.apply([[field, entry]]);
      this.#version.advance(incarnation, rev);
      this.#version.touch(this.#now());
      return;
    }
    void this.sync(); // a gap, a write-back, or another incarnation: read it all
  }

  async #check(): Promise<void> {
    const meta = await this.#store.meta();
    const differs = !this.confirmation.confirmed || this.#version.differs(meta);
    const wroteBack = await this.#writeBackMissing(meta);
    if (differs || wroteBack) await this.#read();
    this.#version.touch(this.#now());
  }

  /** Writes back what Redis lacks of what this copy knows; true when it wrote (then a read follows). */
  async #writeBackMissing(meta: StateMeta): Promise<boolean> {
    if (meta.incarnation === undefined) {
      await this.#restore();
      return true;
    }
    if (this.#version.lost(meta)) {
      await this.#writeBack([...this.#local.state.entries()], meta.incarnation, this.#version.knownRev);
      return true;
    }
    const pending = this.#pending.entries();
    if (pending.length === 0) return false;
    await this.#writeBack(pending, meta.incarnation);
    return true;
  }

  /**
   * This Redis holds no state: flushed, restarted empty, failed over to an empty replica — or new.
   * Everything known here is written to it, under a new incarnation.
   */
  async #restore(): Promise<void> {
    await this.#writeBack([...this.#local.state.entries()], randomUUID());
  }

  /** Writes entries to Redis; the changes made here that went with them are no longer pending. */
  async #writeBack(entries: Array<[string, StateEntry]>, incarnation: string, floor = 0): Promise<void> {
    await this.#store.merge(entries, incarnation, floor);
    for (const [field, entry] of entries) this.#pending.taken(field, entry);
  }

  async #read(): Promise<void> {
    const read = await this.#store.read();
    this.#local.apply(read.entries);
    this.#version.matched(read.meta);
    this.confirmation.read(read.ageMs);
  }
}
