/**
 * The one owner of the operator state: TTL overrides, revocations, blocks and company weights. It holds
 * this replica's copy, changes it for the operator API, keeps it in step with every other replica
 * through Redis, and gives it back to Redis when Redis lost it. The cache policies and the access
 * lists only read from it.
 *
 * In step: a change is applied here at once, then written to Redis by one script that stamps,
 * counts (`rev`) and announces it; every replica applies the announcement (milliseconds), and
 * checks Redis's `rev` every `syncIntervalMs` to heal a missed message.
 *
 * Never served unread: a replica that has not read the state since it started knows no
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
 *
 * The parts, each the owner of one piece of state (docs/architecture.md#the-operator-state): the
 * copy and its listeners (local-copy.ts); the sync through Redis (state-sync.ts), with its checks
 * (sync-loop.ts), the changes Redis does not have yet (pending-changes.ts), the state last matched
 * (shared-version.ts) and the confirmation (confirmation.ts); and the store (control-store.ts).
 */

import type { ResourceName } from '../catalog/resources.js';
import type { RedisClient } from '../platform/redis/connection.js';
import { Confirmation } from './confirmation.js';
import { createControlStore } from './control-store.js';
import { LocalCopy } from './local-copy.js';
import {
  type BlockView,
  type CompanyWeights,
  type EntryKind,
  fieldOf,
  type OperatorState,
  type RevocationView,
  type StateEntry,
  type TtlOverride,
  type TtlOverrides,
} from './operator-state.js';
import { StateSync } from './state-sync.js';

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
  /** The run-time company weights in the upstream budget's line (docs/limits.md#fair-shares). */
  weights(): CompanyWeights;
  /** Told after every change of the weights, as of the overrides. */
  onWeightsChange(listener: (weights: CompanyWeights) => void): void;
  revocations(): RevocationView[];
  blocks(): BlockView[];
  setOverride(resource: ResourceName, override: TtlOverride): Promise<boolean>;
  deleteOverride(resource: ResourceName): Promise<boolean>;
  /** A `jti` or a token digest until the token's `exp` (seconds), or a `sub` until deleted. */
  revoke(kind: RevocationKind, id: string, expSeconds?: number): Promise<boolean>;
  unrevoke(kind: RevocationKind, id: string): Promise<boolean>;
  blockCompany(company: string, blocked: boolean): Promise<boolean>;
  blockEmployee(company: string, employee: string, blocked: boolean): Promise<boolean>;
  /** A company's weight for every replica, over the config's; `undefined`: back to the config's. */
  setWeight(company: string, weight: number | undefined): Promise<boolean>;
  /** Checks the shared state now (the start waits for the first check). Never rejects. */
  sync(): Promise<void>;
  status(): ControlStatus;
  close(): void;
}

/** The control connection's command timeout (src/platform/redis/connection.ts): how long a write-back may take. */
const CONTROL_COMMAND_MS = 1_000;

const REVOCATION_KINDS: Readonly<Record<RevocationKind, EntryKind>> = { jti: 'jti', digest: 'tok', sub: 'sub' };

export function createOperatorControl(options: OperatorControlOptions = {}): OperatorControl {
  const now = options.now ?? Date.now;
  const local = new LocalCopy();
  const shared = options.redis === undefined ? undefined : shareThrough(options.redis, local, options, now);
  const confirmation = shared?.confirmation ?? Confirmation.notShared();
  const pruneTimer = setInterval(() => {
    local.prune(now());
    shared?.prune();
  }, options.pruneIntervalMs ?? 60_000);
  pruneTimer.unref();

  /** Applies a change here, then shares it. */
  async function change(field: string, value: StateEntry['v'], expiresAt: number | null): Promise<boolean> {
    const entry = local.change(field, value, expiresAt, now());
    return shared === undefined ? true : shared.share(field, entry);
  }

  return {
    state: local.state,
    get confirmed() {
      return confirmation.confirmed;
    },
    confirmation: confirmation.promise,
    overrides: () => local.state.overrides(),
    onOverridesChange: (listener) => local.onOverridesChange(listener),
    weights: () => local.state.weights(),
    onWeightsChange: (listener) => local.onWeightsChange(listener),
    revocations: () => local.state.revocations(),
    blocks: () => local.state.blocks(),
    ...operatorChanges(change),
    sync: async () => shared?.sync(),
    status() {
      const common = { entries: local.state.size, confirmed: confirmation.confirmed };
      return shared === undefined
        ? { shared: false, ageMs: undefined, ...common }
        : { shared: true, ageMs: shared.ageMs(), ...common };
    },
    close() {
      shared?.close();
      clearInterval(pruneTimer);
    },
  };
}

/** The sync through Redis, with its defaults. */
function shareThrough(
  redis: NonNullable<OperatorControlOptions['redis']>,
  local: LocalCopy,
  options: OperatorControlOptions,
  now: () => number,
): StateSync {
  const syncIntervalMs = options.syncIntervalMs ?? 1_000;
  const shared = new StateSync({
    store: createControlStore(redis.client, redis.prefix),
    local,
    now,
    onError: options.onError,
    syncIntervalMs,
    settleMs: options.settleMs ?? 2 * syncIntervalMs + CONTROL_COMMAND_MS,
    // Not before the connection is up (its first check follows the start's wait for it).
    ready: () => redis.client.status === 'ready',
  });
  shared.follow(redis.subscriber);
  return shared;
}

type ChangeOf = (field: string, value: StateEntry['v'], expiresAt: number | null) => Promise<boolean>;

/** The operator's changes, each as the entry it writes. */
function operatorChanges(
  change: ChangeOf,
): Pick<
  OperatorControl,
  'setOverride' | 'deleteOverride' | 'revoke' | 'unrevoke' | 'blockCompany' | 'blockEmployee' | 'setWeight'
> {
  return {
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
    setWeight: (company, weight) => change(fieldOf('wt', company), weight === undefined ? null : { weight }, null),
  };
}
