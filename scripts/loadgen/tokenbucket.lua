-- A token bucket with quorate's semantics, for loadgen's redis mode.
-- KEYS[1]: the client's bucket (a hash: tokens, last in µs).
-- ARGV: capacity (tokens), refill rate (tokens per second, > 0), cost.
-- A new client starts full; each call refills min(capacity, tokens +
-- elapsed × rate) and admits iff the balance covers the cost. The time is
-- the server's (TIME), and a clock that steps back refills nothing. The key
-- expires when the bucket would be full again: a full bucket is the same as
-- no bucket. Balances are doubles, not quorate's exact fixed point.
-- Returns {1 if admitted else 0, whole tokens left}.
local capacity = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])

local b = redis.call('HMGET', KEYS[1], 'tokens', 'last')
local tokens, last = tonumber(b[1]), tonumber(b[2])
if tokens == nil or last == nil then
  tokens, last = capacity, now
end
if now > last then
  tokens = math.min(capacity, tokens + (now - last) * rate / 1000000)
  last = now
end
tokens = math.min(capacity, tokens)

local allowed = 0
if tokens >= cost then
  tokens = tokens - cost
  allowed = 1
end
redis.call('HSET', KEYS[1], 'tokens', tokens, 'last', last)
redis.call('PEXPIRE', KEYS[1], math.ceil((capacity - tokens) * 1000 / rate) + 1)
return {allowed, math.floor(tokens)}
