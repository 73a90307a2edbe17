/**
 * The one owner of the operator state (issue 8): TTL overrides, revocations and blocks. It holds
 * this replica's copy, changes it for the operator API, keeps it in step with every other replica
 * through Redis, and gives it back to Redis when Redis lost it. The cache policies and the access
 * lists only read from it.
 *
 * In step: a change is applied here at once, then written to Redis by one script that stamps,
 * counts (`rev`) and announces it; every replica applies the announcement (milliseconds), and
 * checks Redis's `rev` every `syncIntervalMs` to heal a missed message.
 *
 * Never served unread (issue 16): a replica that has not read the state since it started knows no
 * decision, and serving then would be failing open on every revocation. It counts as `confirmed`
 * once it has read a state that every other live replica has had the time to merge its knowledge
 * into: an incarnation at least `settleMs` old. A state written anew (Redis flushed or restarted
 * empty, or a new deployment) is younger; the other replicas write what they know back at their
 * next check, within one sync interval and a command's timeout, so a start waits that long.
 *
 * Never lapsing: the copy here is never replaced by what Redis says, only merged with it (the later
 * stamp wins per entry, deletions included: operator-state.ts). When the check finds that Redis lost
 * the state (no `incarnation`: flushed or restarted empty; another incarnation or a lower `rev`: a
 * failover to a replica that lagged, or a restored snapshot), this replica writes everything it
 * knows back, and so does every other; the merge is the union of what they knew. A change that
 * Redis could not take stays marked and is written at the next check that reaches Redis. Only a
 * restart of every replica *and* of a Redis without persistence can lose the state, and how to keep it
 * (a persistent Redis for operator state) is in docs/scaling-out.md#the-operator-state-and-what-survives-what.
 */
import { randomUUID } from 'node:crypto';
import type { RedisClient } from '../platform/redis.js';
import type { ResourceName } from '../catalog/resources.js';
import { type ControlStore, type StateMeta, createControlStore } from './control-store.js';
import {
  type BlockView,
  type EntryKind,
  OperatorState,
  type RevocationView,
  type StateEntry,
  TOMBSTONE_RETENTION_MS,
  type TtlOverride,
  type TtlOverrides,
  fieldOf,
} from './operator-state.js';

export interface OperatorControlOptions {
  /** Without it the state is this replica's alone (one replica, no Redis). */
  readonly redis?:
    | { readonly client: RedisClient; readonly subscriber: RedisClient; readonly prefix: string }
    | undefined;
  /** How often the shared state is checked against this copy, ms (default 1 000). */
  readonly syncIntervalMs?: number;
  /**
   * How old an incarnation must be before a read of it confirms this replica's state, ms: longer
   * than every other replica takes to check it and write back (default: two sync intervals and
   * the control connection's command timeout).
   */
  readonly settleMs?: number;
  /** How often expired entries are dropped, ms (default 60 000). */
  readonly pruneIntervalMs?: number;
  readonly now?: () => number;
  readonly onError?: (error: unknown) => void;
}

export interface ControlStatus {
  /** Shared through Redis (false: one replica, local state only). */
  readonly shared: boolean;
  /** Since this copy was last confirmed against Redis, ms; `undefined` when not shared. */
  readonly ageMs: number | undefined;
  readonly entries: number;
  /** The state has been read since this replica started (always, when not shared). */
  readonly confirmed: boolean;
}

export type RevocationKind = RevocationView['kind'];

/**
 * Every change applies on this replica at once and resolves `true` once Redis has it (or there is
 * no Redis), `false` when Redis failed: it is then written at the next check that reaches Redis,
 * and the operator hears that the other replicas do not have it yet. Never rejects.
 */
export interface OperatorControl {
  /** The state the hit path reads (access lists, overrides). */
  readonly state: OperatorState;
  /**
   * Read from Redis since this replica started (a state settled there: see `settleMs`), or not
   * shared at all. Until then this replica knows no revocation or block made elsewhere.
   */
  readonly confirmed: boolean;
  /** Resolves once `confirmed` is true (never, if it never is). */
  readonly confirmation: Promise<void>;
  overrides(): TtlOverrides;
  /** Told after every change of the overrides (a change here, from another replica, or a merge). */
  onOverridesChange(listener: (overrides: TtlOverrides) => void): void;
  revocations(): RevocationView[];
  blocks(): BlockView[];
  setOverride(resource: ResourceName, override: TtlOverride): Promise<boolean>;
  deleteOverride(resource: ResourceName): Promise<boolean>;
  /** A `jti` or a token digest until the token's `exp` (seconds), or a `sub` until deleted. */
  revoke(kind: RevocationKind, id: string, expSeconds?: number): Promise<boolean>;
  unrevoke(kind: RevocationKind, id: string): Promise<boolean>;
  blockCompany(company: string, blocked: boolean): Promise<boolean>;
  blockEmployee(company: string, employee: string, blocked: boolean): Promise<boolean>;
  /** Checks the shared state now (the start waits for the first check). Never rejects. */
  sync(): Promise<void>;
  status(): ControlStatus;
  close(): void;
}

/** The control connection's command timeout (src/platform/redis.ts): how long a write-back may take. */
const CONTROL_COMMAND_MS = 1_000;

const REVOCATION_KINDS: Readonly<Record<RevocationKind, EntryKind>> = { jti: 'jti', digest: 'tok', sub: 'sub' };

export function createOperatorControl(options: OperatorControlOptions = {}): OperatorControl {
  const now = options.now ?? Date.now;
  const state = new OperatorState();
  const store: ControlStore | undefined =
    options.redis === undefined ? undefined : createControlStore(options.redis.client, options.redis.prefix);
  const listeners: Array<(overrides: TtlOverrides) => void> = [];
  /** Redis's incarnation and rev as this copy last matched them. */
  let known: StateMeta | undefined;
  let confirmedAt: number | undefined;
  const syncIntervalMs = options.syncIntervalMs ?? 1_000;
  const settleMs = options.settleMs ?? 2 * syncIntervalMs + CONTROL_COMMAND_MS;
  /** A settled state has been read since the start (see the module's comment). */
  let confirmed = store === undefined;
  let markConfirmed: () => void = () => undefined;
  const confirmation = new Promise<void>((resolve) => {
    markConfirmed = resolve;
  });
  if (confirmed) markConfirmed();
  const startedAt = now();
  /** Fields changed here that Redis does not have yet. */
  const dirty = new Set<string>();
  let running: Promise<void> | undefined;
  let again = false;

  function notifyIfOverridesChanged(before: TtlOverrides): void {
    const after = state.overrides();
    if (after !== before) for (const listener of listeners) listener(after);
  }

  function applyAll(entries: Iterable<[string, StateEntry]>): void {
    const before = state.overrides();
    for (const [field, entry] of entries) state.apply(field, entry);
    notifyIfOverridesChanged(before);
  }

  /**
   * Writes entries to Redis; the changes made here that went with them are no longer pending
   * (unless changed again meanwhile).
   */
  async function writeBack(
    redis: ControlStore,
    entries: Array<[string, StateEntry]>,
    incarnation: string,
  ): Promise<void> {
    await redis.merge(entries, incarnation);
    for (const [field, entry] of entries) if (dirty.has(field) && state.get(field) === entry) dirty.delete(field);
  }

  async function checkOnce(redis: ControlStore): Promise<void> {
    const meta = await redis.meta();
    let mustRead =
      !confirmed || known === undefined || meta.rev !== known.rev || meta.incarnation !== known.incarnation;
    if (meta.incarnation === undefined) {
      // This Redis holds no state: flushed, restarted empty, failed over to an empty replica — or
      // new. Keys of the earlier layout come in as the oldest entries; then everything known here.
      const legacy = await redis.legacy();
      applyAll(legacy.map(([field, value, x]): [string, StateEntry] => [field, { t: 1, v: value, x }]));
      await writeBack(redis, [...state.entries()], randomUUID());
      if (legacy.length > 0) await redis.dropLegacy();
      mustRead = true;
    } else if (known !== undefined && (meta.incarnation !== known.incarnation || meta.rev < known.rev)) {
      // Another incarnation, or fewer changes than this copy has seen: Redis lost some of them.
      await writeBack(redis, [...state.entries()], meta.incarnation);
    } else if (dirty.size > 0) {
      const pending: Array<[string, StateEntry]> = [];
      for (const field of dirty) {
        const entry = state.get(field);
        // Expired here since (pruned): nothing is left to write, and Redis drops it by the same rule.
        if (entry === undefined) dirty.delete(field);
        else pending.push([field, entry]);
      }
      if (pending.length > 0) {
        await writeBack(redis, pending, meta.incarnation);
        mustRead = true;
      }
    }
    if (mustRead) {
      const read = await redis.read();
      applyAll(read.entries);
      known = read.meta;
      if (!confirmed && read.ageMs >= settleMs) {
        confirmed = true;
        markConfirmed();
      }
    }
    confirmedAt = now();
  }

  async function sync(): Promise<void> {
    // Not before the connection is up (its first check follows the start's wait for it).
    if (store === undefined || options.redis?.client.status !== 'ready') return;
    if (running !== undefined) {
      again = true; // one more round after the running one: it may have read before this change
      return running;
    }
    running = (async () => {
      do {
        again = false;
        try {
          await checkOnce(store);
        } catch (error) {
          options.onError?.(error); // the last known state keeps applying
          again = false;
        }
      } while (again);
    })().finally(() => {
      running = undefined;
    });
    return running;
  }

  /**
   * Applies a change here, then shares it. Its expiry is decided here, once: the token's `exp` for
   * a revocation, the retention for a deletion (a tombstone), none for the rest.
   */
  async function change(field: string, value: StateEntry['v'], expiresAt: number | null): Promise<boolean> {
    const at = now();
    const previous = state.get(field);
    const x = value === null ? at + TOMBSTONE_RETENTION_MS : expiresAt;
    const local: StateEntry = {
      // Later than the entry it replaces even if this clock is behind the one that stamped it.
      t: Math.max(at, (previous?.t ?? 0) + 1),
      v: value,
      x,
    };
    applyAll([[field, local]]);
    if (store === undefined) return true;
    dirty.add(field);
    try {
      const result = await store.change(field, value, x);
      if (result.kind === 'lost') {
        await sync(); // writes everything back, this change included
        return !dirty.has(field);
      }
      // Redis's stamp replaces this clock's, so that every copy holds the very same entry. A field
      // changed again meanwhile stays pending: that later change has not reached Redis (it may never).
      if (state.get(field) === local) {
        state.replace(field, result.entry);
        dirty.delete(field);
      }
      if (known !== undefined && result.incarnation === known.incarnation && result.rev === known.rev + 1)
        known = { ...known, rev: result.rev };
      else void sync();
      return true;
    } catch (error) {
      options.onError?.(error);
      return false; // still dirty: the next check that reaches Redis writes it
    }
  }

  if (options.redis !== undefined && store !== undefined) {
    const { subscriber } = options.redis;
    const channel = store.channel;
    subscriber.on('message', (from: string, text: string) => {
      if (from !== channel) return;
      const message = store.parseMessage(text);
      if (message === undefined) return;
      if (known !== undefined && message.incarnation === known.incarnation) {
        if (message.rev <= known.rev) return; // already applied (this replica's own change, or read)
        if (message.rev === known.rev + 1 && message.field !== undefined && message.entry !== undefined) {
          applyAll([[message.field, message.entry]]);
          known = { ...known, rev: message.rev };
          confirmedAt = now();
          return;
        }
      }
      void sync(); // a gap, a write-back, or another incarnation: read it all
    });
    // Messages sent while the subscription was down are lost: check at once when it is back.
    subscriber.on('ready', () => void sync());
    subscriber.subscribe(channel).catch((error: unknown) => options.onError?.(error));
  }

  const syncTimer = store === undefined ? undefined : setInterval(() => void sync(), syncIntervalMs);
  syncTimer?.unref();
  const pruneTimer = setInterval(() => {
    const before = state.overrides();
    state.prune(now());
    notifyIfOverridesChanged(before);
    store?.prune().catch((error: unknown) => options.onError?.(error));
  }, options.pruneIntervalMs ?? 60_000);
  pruneTimer.unref();

  return {
    state,
    get confirmed() {
      return confirmed;
    },
    confirmation,
    overrides: () => state.overrides(),
    onOverridesChange(listener) {
      listeners.push(listener);
    },
    revocations: () => state.revocations(),
    blocks: () => state.blocks(),
    setOverride: (resource, override) => change(fieldOf('ttl', resource), override, null),
    deleteOverride: (resource) => change(fieldOf('ttl', resource), null, null),
    revoke(kind, id, expSeconds) {
      const expiresAt = kind === 'sub' || expSeconds === undefined ? null : expSeconds * 1000;
      return change(fieldOf(REVOCATION_KINDS[kind], id), true, expiresAt);
    },
    unrevoke: (kind, id) => change(fieldOf(REVOCATION_KINDS[kind], id), null, null),
    blockCompany: (company, blocked) => change(fieldOf('co', company), blocked ? true : null, null),
    blockEmployee: (company, employee, blocked) =>
      change(fieldOf('em', `${company}/${employee}`), blocked ? true : null, null),
    sync,
    status() {
      if (store === undefined) return { shared: false, ageMs: undefined, entries: state.size, confirmed };
      return { shared: true, ageMs: now() - (confirmedAt ?? startedAt), entries: state.size, confirmed };
    },
    close() {
      if (syncTimer !== undefined) clearInterval(syncTimer);
      clearInterval(pruneTimer);
    },
  };
}
