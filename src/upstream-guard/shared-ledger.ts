/**
 * The upstream budget's ledger in Redis, shared by every replica (the rule is
 * `src/upstream-guard/slot-ledger.ts`'s, the protocol around it docs/architecture.md#the-upstream-budget):
 *
 *   {<prefix>:budget}:state   hash: `epoch` (a random id), `node` (the run id of the Redis process
 *                             that wrote it), `open` (when grants may begin) and `last` (when the
 *                             latest start is due), on Redis's clock
 *   {<prefix>:budget}:holds   sorted set: slot id → until when it counts (Redis ms)
 *   {<prefix>:budget}:starts  sorted set: slot id → when it started (Redis ms)
 *   {<prefix>:budget}:present set: the replicas whose slots the ledger counts, heard since grants
 *                             last closed (the quorum that opens them early, below)
 *
 * One hash tag: a Redis Cluster keeps the three in one slot, and each script is atomic there.
 * Times are Redis's (`TIME`), so replicas with skewed clocks agree.
 *
 * A new epoch begins whenever the state may lack slots that are still held: it does not exist
 * (never written, flushed, restarted empty), or another Redis process wrote it (a failover promoted
 * a replica that may have missed the last grants; a restart from a snapshot). Grants then wait
 * until `open`, `rejoinMs` later, and every replica registers the slots it holds before that:
 * the ledger is whole again before it grants anything.
 *
 * Grants open before `open` once the ledger counts every replica's slots: while grants are closed,
 * each replica that has registered in the epoch (or is of it already) is marked present, and once
 * the present replicas that were in the fleet before reach the highest replica count one of them has
 * seen (`src/platform/redis/replica-count.ts`: the highest count of the last minutes), no replica can hold
 * a slot the ledger lacks, and grants open at once. A replica that died recently keeps that count
 * up, and the window then runs its whole length. A replica that never registered in any epoch
 * before (a start) holds no slot the ledger granted: its own register, but it is no part of the
 * quorum, so that it cannot stand in for an absent one.
 */
import type { RedisClient } from '../platform/redis/connection.js';
import { type BudgetLimits, RATE_WINDOW_MS, RESERVE_AHEAD_MS } from './slot-ledger.js';

/** Redis time in ms, the state's epoch (begun anew when lost or written by another process). */
const PRELUDE = `local time = redis.call('time')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local node = string.match(redis.call('info', 'server'), 'run_id:(%x+)') or ''
local epoch = redis.call('hget', KEYS[1], 'epoch')
local open = tonumber(redis.call('hget', KEYS[1], 'open') or '0') or 0
if (not epoch) or redis.call('hget', KEYS[1], 'node') ~= node then
  epoch = ARGV[1]
  open = now + tonumber(ARGV[2])
  redis.call('hset', KEYS[1], 'epoch', epoch, 'node', node, 'open', string.format('%d', open), 'expect', '0')
  redis.call('del', KEYS[4])
end`;

/**
 * Grants slots to a replica of the current epoch, while grants are open: the same rule as
 * `SlotLedger.grant`, starts spaced and due at most `reserve ms` ahead.
 * KEYS: state, holds, starts, present. ARGV: new epoch, rejoin ms, the caller's epoch, maxConcurrent,
 * maxPerSecond, window ms, hold ms, reserve ms, then the slot ids asked for.
 * Returns {kind, epoch, open in ms, retry ms (-1: when a slot is released), then the starts in ms}.
 */
const ACQUIRE = `${PRELUDE}
if epoch ~= ARGV[3] then return {'epoch', epoch, open - now, -1} end
if now < open then return {'closed', epoch, open - now, -1} end
local concurrent = tonumber(ARGV[4])
local perSecond = tonumber(ARGV[5])
local window = tonumber(ARGV[6])
local hold = tonumber(ARGV[7])
local reserve = tonumber(ARGV[8])
local spacing = window / perSecond
redis.call('zremrangebyscore', KEYS[2], '-inf', now)
redis.call('zremrangebyscore', KEYS[3], '-inf', now - window)
local held = redis.call('zcard', KEYS[2])
local started = redis.call('zcard', KEYS[3])
local last = tonumber(redis.call('hget', KEYS[1], 'last') or '')
local nextStart = now
if last and last + spacing > now then nextStart = last + spacing end
local starts = {}
local i = 9
while i <= #ARGV and held < concurrent and started < perSecond and nextStart <= now + reserve do
  redis.call('zadd', KEYS[2], nextStart + hold, ARGV[i])
  redis.call('zadd', KEYS[3], nextStart, ARGV[i])
  starts[#starts + 1] = string.format('%.3f', nextStart - now)
  last = nextStart
  nextStart = nextStart + spacing
  held = held + 1
  started = started + 1
  i = i + 1
end
if #starts > 0 then
  redis.call('hset', KEYS[1], 'last', string.format('%.3f', last))
  redis.call('pexpire', KEYS[2], math.ceil(hold + window + reserve))
  redis.call('pexpire', KEYS[3], math.ceil(hold + window + reserve))
  local reply = {'granted', epoch, open - now, 0}
  for _, start in ipairs(starts) do reply[#reply + 1] = start end
  return reply
end
if held >= concurrent then return {'full', epoch, open - now, -1} end
local free = nextStart - reserve
if started >= perSecond then
  local oldest = redis.call('zrange', KEYS[3], 0, 0, 'withscores')
  if oldest[2] and tonumber(oldest[2]) + window > free then free = tonumber(oldest[2]) + window end
end
return {'full', epoch, open - now, math.max(1, math.ceil(free - now))}`;

/**
 * Registers slots a replica holds (its own: granted before the epoch began, or taken from its local
 * share while it was cut off), and with `close` moves `open` to `rejoin ms` from now at least (a
 * window that begins anew forgets who was present). While grants are closed, marks the caller
 * present when its slots are counted (it registers now, or it beats and is of this epoch already)
 * and it was in the fleet before; opens grants once as many are present as the most replicas
 * expected. A probe (a replica on its share, asking whether Redis answers before it rejoins) is
 * never present: its share's slots are not counted yet. A slot a rejoining replica takes from its
 * share (`share`) is registered only while grants are closed: once they are open, the ledger's
 * rule decides, and the replica asks for it like any other (registered beside slots granted by
 * the rule, it could take the limits past their bound).
 * KEYS: state, holds, starts, present. ARGV: new epoch, rejoin ms, close ('1' or '0'), window ms,
 * hold ms, the caller's id, 'register', 'beat' or 'probe', the caller's epoch, '1' when it was in
 * an epoch before, the replicas it expects, then id, age ms pairs (the age of a start due ahead is
 * negative). Returns {epoch, open in ms, 1 when the slots were registered, else 0}.
 */
const REGISTER = `${PRELUDE}
if ARGV[3] == '1' and open < now + tonumber(ARGV[2]) then
  if open <= now then
    redis.call('del', KEYS[4])
    redis.call('hset', KEYS[1], 'expect', '0')
  end
  open = now + tonumber(ARGV[2])
  redis.call('hset', KEYS[1], 'open', string.format('%d', open))
end
if ARGV[7] == 'share' and now >= open then return {epoch, open - now, 0} end
local window = tonumber(ARGV[4])
local hold = tonumber(ARGV[5])
redis.call('zremrangebyscore', KEYS[2], '-inf', now)
redis.call('zremrangebyscore', KEYS[3], '-inf', now - window)
local last = tonumber(redis.call('hget', KEYS[1], 'last') or '')
local later = false
for i = 11, #ARGV - 1, 2 do
  local age = tonumber(ARGV[i + 1])
  if age < hold then
    redis.call('zadd', KEYS[2], now - age + hold, ARGV[i])
    if age < window then redis.call('zadd', KEYS[3], now - age, ARGV[i]) end
    if (not last) or now - age > last then
      last = now - age
      later = true
    end
  end
end
if later then redis.call('hset', KEYS[1], 'last', string.format('%.3f', last)) end
if #ARGV > 10 then
  redis.call('pexpire', KEYS[2], hold + window)
  redis.call('pexpire', KEYS[3], hold + window)
end
if now < open and ARGV[9] == '1' and (ARGV[7] ~= 'probe' and (ARGV[7] ~= 'beat' or ARGV[8] == epoch)) then
  redis.call('sadd', KEYS[4], ARGV[6])
  redis.call('pexpire', KEYS[4], tonumber(ARGV[2]) * 2)
  local expect = math.max(tonumber(redis.call('hget', KEYS[1], 'expect') or '0') or 0, tonumber(ARGV[10]))
  redis.call('hset', KEYS[1], 'expect', string.format('%d', expect))
  if redis.call('scard', KEYS[4]) >= expect then
    open = now
    redis.call('hset', KEYS[1], 'open', string.format('%d', open))
  end
end
return {epoch, open - now, 1}`;

export interface EpochView {
  /** The epoch the state is in now. */
  readonly epoch: string;
  /** How long until grants open, ms (≤ 0: open now). */
  readonly openInMs: number;
}

/** A registration's answer: the epoch, and whether the slots given were registered (`share`: not once open). */
export interface Registration extends EpochView {
  readonly registered: boolean;
}

export type SharedAttempt = EpochView &
  /** The first `startsInMs.length` of the ids asked for, each to start that many ms from now. */
  (
    | { readonly kind: 'granted'; readonly startsInMs: readonly number[] }
    /** `retryInMs`: when the rate allows the next start; `undefined`: when a slot is released. */
    | { readonly kind: 'full'; readonly retryInMs: number | undefined }
    /** Grants have not opened yet (a new epoch, or a replica rejoining). */
    | { readonly kind: 'closed' }
    /** The caller's epoch is not the state's: it must register its slots first. */
    | { readonly kind: 'epoch' }
  );

/**
 * What a call to the ledger's registration is, for the quorum: `register` (the caller's slots, all
 * of them, registered in the current epoch), `share` (a slot a rejoining replica takes from its
 * share: registered only while grants are closed), `beat` (the epoch read by a replica whose
 * slots are the ledger's own: present if it is of this epoch), `probe` (the epoch read by a
 * replica on its share, whose slots are not registered yet: never present).
 */
export type RegisterRole = 'register' | 'share' | 'beat' | 'probe';

/** Who registers (or beats), for the quorum that opens grants early. */
export interface RegisterCaller {
  /** The replica's id in the ledger (one per process). */
  readonly id: string;
  readonly role: RegisterRole;
  /**
   * The epoch this replica last registered in; `undefined` before its first registration (then it
   * holds no slot the ledger granted, and is no part of the quorum).
   */
  readonly epoch: string | undefined;
  /** The most replicas it has counted lately: the quorum it asks for. */
  readonly expectedReplicas: number;
}

export interface SharedLedgerOptions {
  readonly client: RedisClient;
  readonly prefix: string;
  /** How long a slot counts at most, released or not, ms. */
  readonly holdMs: number;
  /** How long grants wait after a new epoch or a rejoin, ms: every replica registers meanwhile. */
  readonly rejoinMs: number;
  /** A fresh epoch id, for a state begun anew. */
  readonly newEpoch: () => string;
}

const ATTEMPT_KINDS = ['granted', 'full', 'closed', 'epoch'] as const;

function text(value: unknown): string {
  if (typeof value === 'string') return value;
  if (Buffer.isBuffer(value)) return value.toString('utf8');
  throw new TypeError('unexpected reply from Redis');
}

export class SharedLedger {
  readonly #client: RedisClient;
  readonly #keys: readonly [string, string, string, string];
  readonly #holdMs: number;
  readonly #rejoinMs: number;
  readonly #newEpoch: () => string;

  constructor(options: SharedLedgerOptions) {
    this.#client = options.client;
    const tag = `{${options.prefix}:budget}`;
    this.#keys = [`${tag}:state`, `${tag}:holds`, `${tag}:starts`, `${tag}:present`];
    this.#holdMs = options.holdMs;
    this.#rejoinMs = options.rejoinMs;
    this.#newEpoch = options.newEpoch;
  }

  /** The key whose node serves the ledger (for a breaker that is kept per node). */
  get key(): string {
    return this.#keys[0];
  }

  async acquire(epoch: string | undefined, ids: readonly string[], limits: BudgetLimits): Promise<SharedAttempt> {
    const reply = (await this.#client.eval(
      ACQUIRE,
      4,
      ...this.#keys,
      this.#newEpoch(),
      String(this.#rejoinMs),
      epoch ?? '',
      String(limits.maxConcurrent),
      String(limits.maxPerSecond),
      String(RATE_WINDOW_MS),
      String(this.#holdMs),
      String(RESERVE_AHEAD_MS),
      ...ids,
    )) as unknown[];
    const kind = ATTEMPT_KINDS.find((candidate) => candidate === text(reply[0]));
    const view = { epoch: text(reply[1]), openInMs: Number(reply[2]) };
    const retry = Number(reply[3]);
    switch (kind) {
      case 'granted':
        return { ...view, kind, startsInMs: reply.slice(4).map((start) => Number(text(start))) };
      case 'full':
        return { ...view, kind, retryInMs: retry > 0 ? retry : undefined };
      case 'closed':
      case 'epoch':
        return { ...view, kind };
      default:
        throw new TypeError('unexpected reply from the budget script');
    }
  }

  /**
   * Registers the slots this replica holds (`ageMs`: how long each has been held) in the current
   * epoch, or with `caller.role` `beat` or `probe` and no slots only reads the epoch;
   * `close` moves the opening of grants `rejoinMs` away. Either marks the caller present while
   * grants are closed, when its slots are counted (the quorum: see the top of this file).
   */
  async register(
    holds: ReadonlyArray<{ readonly id: string; readonly ageMs: number }>,
    close: boolean,
    caller: RegisterCaller,
  ): Promise<Registration> {
    const pairs = holds.flatMap(({ id, ageMs }) => [id, String(Math.round(ageMs))]);
    const reply = (await this.#client.eval(
      REGISTER,
      4,
      ...this.#keys,
      this.#newEpoch(),
      String(this.#rejoinMs),
      close ? '1' : '0',
      String(RATE_WINDOW_MS),
      String(this.#holdMs),
      caller.id,
      caller.role,
      caller.epoch ?? '',
      caller.epoch === undefined ? '0' : '1',
      String(Math.max(1, Math.floor(caller.expectedReplicas))),
      ...pairs,
    )) as unknown[];
    return { epoch: text(reply[0]), openInMs: Number(reply[1]), registered: Number(reply[2]) === 1 };
  }

  async release(ids: readonly string[]): Promise<void> {
    if (ids.length > 0) await this.#client.zrem(this.#keys[1], ...ids);
  }
}
