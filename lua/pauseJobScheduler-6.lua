--[[
  Pause a job scheduler (docs/protocol.md §4.6): park its pending iteration where no runtime
  takes it. The iteration repeat:<id>:<score> is taken out of delayed, prioritized or wait
  (its hash stays as it is) and the scheduler is recorded in schedulers:paused with that score.
  A BullMQ 6.7 worker advances a schedule only through that iteration, so nothing runs it until
  a resume puts a run back. A current iteration already running is left to finish (it was
  taken before the pause); the steps of both runtimes' EchoMQ side produce nothing for a paused
  scheduler, and a resume places the next run.

  A record in schedulers:paused whose score is not the scheduler's any more is stale (a BullMQ
  upsert placed a new iteration, §4.6): it is replaced, and the iteration it parked is deleted
  if it is still parked (in no list, never started).

  Input:
    KEYS[1]  repeat
    KEYS[2]  delayed
    KEYS[3]  wait
    KEYS[4]  paused             legacy list
    KEYS[5]  prioritized
    KEYS[6]  schedulers:paused  ZSET: member = scheduler id, score = the parked iteration's slot

    ARGV[1]  scheduler id
    ARGV[2]  key prefix "<prefix>:{<queue>}:"

  Output:
    1   paused (its pending iteration parked, or none was pending)
    0   already paused: nothing written
    -1  no such scheduler (not in repeat, or a hash without `ic`): nothing written

  Events: none (the iteration is not removed: it waits, parked, for the resume).
]]
-- @include "toIntString"
-- @include "locatePendingIteration"
-- @include "removeJobKeys"

local q = {repeatKey = KEYS[1], delayed = KEYS[2], wait = KEYS[3], paused = KEYS[4], prioritized = KEYS[5]}
local parkedKey = KEYS[6]
local schedulerId = ARGV[1]
local prefix = ARGV[2]

local score = redis.call("ZSCORE", q.repeatKey, schedulerId)
if not score or not redis.call("HGET", q.repeatKey .. ":" .. schedulerId, "ic") then
  return -1
end
score = tonumber(score)
local parked = redis.call("ZSCORE", parkedKey, schedulerId)
if parked and tonumber(parked) == score then
  return 0
end
if parked then
  local staleId = "repeat:" .. schedulerId .. ":" .. toIntString(tonumber(parked))
  if not locatePendingIteration(q, staleId) and not redis.call("HGET", prefix .. staleId, "processedOn") then
    removeJobKeys(prefix .. staleId)
  end
end

local jobId = "repeat:" .. schedulerId .. ":" .. toIntString(score)
local where = locatePendingIteration(q, jobId)
if where == "delayed" or where == "prioritized" then
  redis.call("ZREM", q[where], jobId)
elseif where then
  redis.call("LREM", q[where], 0, jobId)
end
redis.call("ZADD", parkedKey, toIntString(score), schedulerId)
return 1
