--[[
  Read a rank range of job schedulers in one round trip: ids, pending-iteration millis and
  hashes together (BullMQ reads the same data with ZRANGE plus one HGETALL per id). A member
  whose hash is missing comes back with an empty hash; the caller skips it (nothing is deleted).

  Input:
    KEYS[1]  repeat
    ARGV[1]  first rank
    ARGV[2]  last rank (inclusive; negative counts from the end)
    ARGV[3]  "1" for ascending next-run order, "0" for descending

  Output:
    flat array: id, score (string), flat HGETALL of repeat:<id>, id, score, HGETALL, ...

  Events: none.
]]
local members
if ARGV[3] == "1" then
  members = redis.call("ZRANGE", KEYS[1], ARGV[1], ARGV[2], "WITHSCORES")
else
  members = redis.call("ZREVRANGE", KEYS[1], ARGV[1], ARGV[2], "WITHSCORES")
end
local out = {}
for i = 1, #members, 2 do
  out[#out + 1] = members[i]
  out[#out + 1] = members[i + 1]
  out[#out + 1] = redis.call("HGETALL", KEYS[1] .. ":" .. members[i])
end
return out
