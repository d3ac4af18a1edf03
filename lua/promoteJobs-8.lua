--[[
  Promote delayed jobs in bulk (Queue.promote_jobs): up to `count` jobs of delayed, the
  earliest due first, each as promote moves one: hash delay = 0, then prioritized when it has
  a priority, else wait (LPUSH). A member whose hash is gone is dropped from the set. The
  client calls again while a call took `count` ids.

  Input:
    KEYS[1] delayed   KEYS[2] wait   KEYS[3] prioritized   KEYS[4] pc   KEYS[5] meta
    KEYS[6] active   KEYS[7] marker   KEYS[8] events
    ARGV[1] key prefix "<base>:"   ARGV[2] count (an integer >= 1)

  Output:
    {taken, promoted}: ids taken from delayed, and how many of them were jobs put in line
    an error reply, writing nothing, for a bad count

  Events: capped "waiting" (jobId, prev=delayed) per job, the earliest due first.
]]
-- @include "requeueSetMembers"
-- @include "isSafeInteger"
local prefix = ARGV[1]
local count = tonumber(ARGV[2])
if not (isSafeInteger(count) and count >= 1) then
  return redis.error_reply("ERR promoteJobs: count must be an integer >= 1, got " .. tostring(ARGV[2]))
end
local ids = redis.call("ZRANGEBYSCORE", KEYS[1], "-inf", "+inf", "LIMIT", 0, ARGV[2])
local q = {wait = KEYS[2], prioritized = KEYS[3], pc = KEYS[4], meta = KEYS[5], active = KEYS[6],
  marker = KEYS[7], events = KEYS[8]}
return requeueSetMembers(KEYS[1], ids, prefix, "delayed", q)
