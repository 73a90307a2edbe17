/**
 * The Lua scripts of the control store (control-store.ts): each runs atomically on the Redis that
 * holds the state (both keys share one hash tag, so on a cluster too), and reads its clock from
 * `TIME`, so that replicas with skewed clocks agree on the order of changes.
 */

/** Redis time in ms, inside a script. */
const NOW = `local time = redis.call('time')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)`;

/**
 * One change: stamped later than the entry it replaces, written, counted and announced; refused
 * (`lost`) when this Redis does not hold the state, so that a change never starts a new state that
 * lacks everything else (the caller writes everything back first).
 * KEYS: state, meta. ARGV: field, value JSON ('' for a deletion), expiry ms ('' for none: the
 * caller decides every entry's expiry, a tombstone's retention included), channel.
 */
export const CHANGE_SCRIPT = `${NOW}
local incarnation = redis.call('hget', KEYS[2], 'incarnation')
if not incarnation then return {'lost'} end
local t = now
local current = redis.call('hget', KEYS[1], ARGV[1])
if current then
  local ok, decoded = pcall(cjson.decode, current)
  if ok and type(decoded) == 'table' and tonumber(decoded.t) and tonumber(decoded.t) >= t then t = tonumber(decoded.t) + 1 end
end
local x = 'null'
if ARGV[3] ~= '' then x = ARGV[3] end
local v = 'null'
if ARGV[2] ~= '' then v = ARGV[2] end
local entry = '{"t":' .. string.format('%d', t) .. ',"x":' .. x .. ',"v":' .. v .. '}'
redis.call('hset', KEYS[1], ARGV[1], entry)
local rev = redis.call('hincrby', KEYS[2], 'rev', 1)
redis.call('publish', ARGV[4], '{"rev":' .. rev .. ',"inc":' .. cjson.encode(incarnation) .. ',"f":' .. cjson.encode(ARGV[1]) .. ',"e":' .. entry .. '}')
return {'ok', incarnation, rev, entry}`;

/**
 * A write-back: each entry kept where it wins (the later stamp) and has not expired; the state gets
 * an incarnation if it had none. Announced (without the entries: replicas read it all) when
 * anything changed, or when `rev` is not above the floor the writer gives (the highest `rev` it
 * has seen, when it found Redis behind it): `rev` then moves past the floor, so that every replica
 * that saw up to it sees a gap and reads everything, never a number it takes for a change already
 * applied.
 * KEYS: state, meta. ARGV: incarnation if new, channel, floor ('0': none), then field, entry text pairs.
 */
export const MERGE_SCRIPT = `${NOW}
local incarnation = redis.call('hget', KEYS[2], 'incarnation')
if not incarnation then
  incarnation = ARGV[1]
  redis.call('hset', KEYS[2], 'incarnation', incarnation, 'born', string.format('%d', now))
end
local written = 0
for i = 4, #ARGV, 2 do
  local field = ARGV[i]
  local text = ARGV[i + 1]
  local ok, incoming = pcall(cjson.decode, text)
  if ok and type(incoming) == 'table' and tonumber(incoming.t) then
    local x = tonumber(incoming.x)
    if x == nil or x > now then
      local wins = true
      local current = redis.call('hget', KEYS[1], field)
      if current then
        local ok2, existing = pcall(cjson.decode, current)
        if ok2 and type(existing) == 'table' and tonumber(existing.t) then
          local et = tonumber(existing.t)
          local it = tonumber(incoming.t)
          wins = it > et or (it == et and text > current)
        end
      end
      if wins then
        redis.call('hset', KEYS[1], field, text)
        written = written + 1
      end
    end
  end
end
local rev = tonumber(redis.call('hget', KEYS[2], 'rev') or '0')
local floor = tonumber(ARGV[3]) or 0
if written > 0 or (floor > 0 and rev <= floor) then
  rev = math.max(rev, floor) + 1
  redis.call('hset', KEYS[2], 'rev', string.format('%d', rev))
  redis.call('publish', ARGV[2], '{"rev":' .. rev .. ',"inc":' .. cjson.encode(incarnation) .. '}')
end
return {incarnation, rev, written}`;

/**
 * The whole state with its meta and the incarnation's age (ms; -1 when it has no `born`: written
 * before it was kept, so old), in one atomic read. KEYS: state, meta.
 */
export const READ_SCRIPT = `${NOW}
local born = tonumber(redis.call('hget', KEYS[2], 'born') or '')
local age = -1
if born then age = math.max(0, now - born) end
return {redis.call('hget', KEYS[2], 'incarnation') or '', tonumber(redis.call('hget', KEYS[2], 'rev') or '0'), redis.call('hgetall', KEYS[1]), age}`;

/** Drops the expired entries (on Redis's clock). KEYS: state. */
export const PRUNE_SCRIPT = `${NOW}
local all = redis.call('hgetall', KEYS[1])
local dropped = 0
for i = 1, #all, 2 do
  local ok, entry = pcall(cjson.decode, all[i + 1])
  if ok and type(entry) == 'table' and tonumber(entry.x) and tonumber(entry.x) <= now then
    redis.call('hdel', KEYS[1], all[i])
    dropped = dropped + 1
  end
end
return dropped`;
