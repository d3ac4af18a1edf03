--[[
  Run a job scheduler once now, outside its schedule (docs/protocol.md §4.6): one extra
  iteration repeat:<id>:manual-<ms> goes to wait (prioritized when the template has a
  priority), paused or not. The id says it is a manual run; `<ms>` is now, or the first
  millisecond after it whose id is free (two runs in the same ms). The scheduler's score, its
  `ic` and the iterations' `repeat.count` do not move: `limit` does not count a manual run, and
  no runtime's step produces from it (it is not the current iteration).

  Input:
    KEYS[1]  repeat
    KEYS[2]  delayed
    KEYS[3]  wait
    KEYS[4]  meta
    KEYS[5]  prioritized
    KEYS[6]  marker
    KEYS[7]  id
    KEYS[8]  events
    KEYS[9]  pc
    KEYS[10] active

    ARGV[1]  scheduler id
    ARGV[2]  the iteration's opts, JSON (jobId and delay are set here)
    ARGV[3]  now (ms)
    ARGV[4]  key prefix "<prefix>:{<queue>}:"

  Output:
    the manual iteration's job id
    -1     no such scheduler: nothing written
    error  "ERR runJobSchedulerNow: ..." for arguments out of their range: nothing written

  Events: "added" then "waiting".
]]
-- @include "toIntString"
-- @include "getOrSetMaxEvents"
-- @include "isJobSchedulerMillis"
-- @include "placeJobSchedulerIteration"

local q = {repeatKey = KEYS[1], delayed = KEYS[2], wait = KEYS[3], meta = KEYS[4], prioritized = KEYS[5],
           marker = KEYS[6], id = KEYS[7], events = KEYS[8], pc = KEYS[9], active = KEYS[10]}
local schedulerId = ARGV[1]
local now = tonumber(ARGV[3])
local prefix = ARGV[4]

local jobOpts = cjson.decode(ARGV[2])
if type(jobOpts) ~= "table" then
  return redis.error_reply("ERR runJobSchedulerNow: ARGV[2] opts must be a JSON object")
end
if not isJobSchedulerMillis(now) or now < 0 then
  return redis.error_reply("ERR runJobSchedulerNow: ARGV[3] now must be whole ms a Date holds")
end
local schedulerKey = q.repeatKey .. ":" .. schedulerId
if not redis.call("ZSCORE", q.repeatKey, schedulerId) or not redis.call("HGET", schedulerKey, "ic") then
  return -1
end
local at = now
local jobId = "repeat:" .. schedulerId .. ":manual-" .. toIntString(at)
while redis.call("EXISTS", prefix .. jobId) == 1 do
  at = at + 1
  jobId = "repeat:" .. schedulerId .. ":manual-" .. toIntString(at)
end
local attrs = redis.call("HMGET", schedulerKey, "name", "data")
local maxEvents = getOrSetMaxEvents(q.meta)
redis.call("INCR", q.id)
placeJobSchedulerIteration(q, prefix, schedulerId, jobId, now, jobOpts, attrs[1] or schedulerId, attrs[2] or "{}",
  ARGV[3], maxEvents)
return jobId
