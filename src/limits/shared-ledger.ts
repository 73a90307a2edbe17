/**
 * The upstream budget's ledger in Redis, shared by every replica (issue 16; the rule is
 * `src/limits/slot-ledger.ts`'s, the protocol around it docs/architecture.md#the-upstream-budget):
 *
 *   {<prefix>:budget}:state   hash: `epoch` (a random id), `node` (the run id of the Redis process
 *                             that wrote it), `open` (when grants may begin) and `last` (when the
 *                             latest start is due), on Redis's clock
 *   {<prefix>:budget}:holds   sorted set: slot id → until when it counts (Redis ms)
 *   {<prefix>:budget}:starts  sorted set: slot id → when it started (Redis ms)
 *
 * One hash tag: a Redis Cluster keeps the three in one slot, and each script is atomic there.
 * Times are Redis's (`TIME`), so replicas with skewed clocks agree.
 *
 * A new epoch begins whenever the state may lack slots that are still held: it does not exist
 * (never written, flushed, restarted empty), or another Redis process wrote it (a failover promoted
 * a replica that may have missed the last grants; a restart from a snapshot). Grants then wait
 * until `open`, `rejoinMs` later, and every replica registers the slots it holds before that:
 * the ledger is whole again before it grants anything.
 */
import type { RedisClient } from '../platform/redis.js';
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
  redis.call('hset', KEYS[1], 'epoch', epoch, 'node', node, 'open', string.format('%d', open))
end`;

/**
 * Grants slots to a replica of the current epoch, while grants are open: the same rule as
 * `SlotLedger.grant`, starts spaced and due at most `reserve ms` ahead.
 * KEYS: state, holds, starts. ARGV: new epoch, rejoin ms, the caller's epoch, maxConcurrent,
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
 * share while it was cut off), and with `close` moves `open` to `rejoin ms` from now at least.
 * KEYS: state, holds, starts. ARGV: new epoch, rejoin ms, close ('1' or '0'), window ms, hold ms,
 * then id, age ms pairs (the age of a start due ahead is negative). Returns {epoch, open in ms}.
 */
const REGISTER = `${PRELUDE}
if ARGV[3] == '1' and open < now + tonumber(ARGV[2]) then
  open = now + tonumber(ARGV[2])
  redis.call('hset', KEYS[1], 'open', string.format('%d', open))
end
local window = tonumber(ARGV[4])
local hold = tonumber(ARGV[5])
redis.call('zremrangebyscore', KEYS[2], '-inf', now)
redis.call('zremrangebyscore', KEYS[3], '-inf', now - window)
local last = tonumber(redis.call('hget', KEYS[1], 'last') or '')
local later = false
for i = 6, #ARGV - 1, 2 do
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
if #ARGV > 5 then
  redis.call('pexpire', KEYS[2], hold + window)
  redis.call('pexpire', KEYS[3], hold + window)
end
return {epoch, open - now}`;

export interface EpochView {
  /** The epoch the state is in now. */
  readonly epoch: string;
  /** How long until grants open, ms (≤ 0: open now). */
  readonly openInMs: number;
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
  readonly #keys: readonly [string, string, string];
  readonly #holdMs: number;
  readonly #rejoinMs: number;
  readonly #newEpoch: () => string;

  constructor(options: SharedLedgerOptions) {
    this.#client = options.client;
    const tag = `{${options.prefix}:budget}`;
    this.#keys = [`${tag}:state`, `${tag}:holds`, `${tag}:starts`];
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
      3,
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
   * Registers the slots this replica holds (`ageMs`: how long each has been held); `close` moves
   * the opening of grants `rejoinMs` away. With no slots and no `close`: reads the epoch.
   */
  async register(
    holds: ReadonlyArray<{ readonly id: string; readonly ageMs: number }>,
    close: boolean,
  ): Promise<EpochView> {
    const pairs = holds.flatMap(({ id, ageMs }) => [id, String(Math.round(ageMs))]);
    const reply = (await this.#client.eval(
      REGISTER,
      3,
      ...this.#keys,
      this.#newEpoch(),
      String(this.#rejoinMs),
      close ? '1' : '0',
      String(RATE_WINDOW_MS),
      String(this.#holdMs),
      ...pairs,
    )) as unknown[];
    return { epoch: text(reply[0]), openInMs: Number(reply[1]) };
  }

  async release(ids: readonly string[]): Promise<void> {
    if (ids.length > 0) await this.#client.zrem(this.#keys[1], ...ids);
  }
}
