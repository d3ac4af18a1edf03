--[[
  Clean one state: delete the jobs that are older than a cutoff, up to a limit, and report how
  many went. "Older" is judged by finishedOn for completed/failed (the set's score), by
  processedOn or else timestamp for delayed, by timestamp for prioritized, and by finishedOn,
  processedOn or timestamp for the lists. Locked active jobs and the pending iteration of a
  live job scheduler are never cleaned. List cleaning starts from the oldest end (the tail).

  Input:
    KEYS[1] <state> (the set or list cleaned)   KEYS[2] events   KEYS[3] repeat (job schedulers zset)
    ARGV[1] key prefix "<base>:"   ARGV[2] cutoff timestamp (ms)   ARGV[3] limit (0 = no limit)
    ARGV[4] state: completed, failed, delayed, prioritized, wait, paused or active

  Output:
    the ids of the deleted jobs

  Events: cleaned (count), one per call, even for 0 (uncapped, as BullMQ writes it).
]]
-- @include "isJobSchedulerJob"
-- @include "removeJobHard"
local setKey, prefix, state = KEYS[1], ARGV[1], ARGV[4]
local cutoff = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])
local deleted = {}

local function jobTime(jobKey, fields)
  local values = redis.call("HMGET", jobKey, unpack(fields))
  for i = 1, #fields do
    if values[i] then
      return tonumber(values[i])
    end
  end
  return nil
end

local function full()
  return limit > 0 and #deleted >= limit
end

if state == "wait" or state == "paused" or state == "active" then
  local first = 0
  if limit > 0 then
    first = -limit
  end
  local ids = redis.call("LRANGE", setKey, first, -1)
  local kept = {}
  for i = #ids, 1, -1 do
    local jobId = ids[i]
    local jobKey = prefix .. jobId
    if not full() and (state ~= "active" or redis.call("EXISTS", jobKey .. ":lock") == 0)
        and not isJobSchedulerJob(jobId, jobKey, KEYS[3]) then
      local ts = jobTime(jobKey, {"finishedOn", "processedOn", "timestamp"})
      if not ts or ts <= cutoff then
        removeJobHard(prefix, jobId)
        table.insert(deleted, jobId)
      end
    end
  end
  for _, jobId in ipairs(deleted) do
    redis.call("LREM", setKey, -1, jobId)
  end
else
  local finished = state == "completed" or state == "failed"
  local maxScore = "+inf"
  if finished then
    maxScore = ARGV[2]
  end
  local ids
  if limit > 0 then
    ids = redis.call("ZRANGEBYSCORE", setKey, 0, maxScore, "LIMIT", 0, limit)
  else
    ids = redis.call("ZRANGEBYSCORE", setKey, 0, maxScore)
  end
  local fields = {"timestamp"}
  if state == "delayed" then
    fields = {"processedOn", "timestamp"}
  end
  for _, jobId in ipairs(ids) do
    local jobKey = prefix .. jobId
    if not full() and (finished or not isJobSchedulerJob(jobId, jobKey, KEYS[3])) then
      local ts = nil
      if not finished then
        ts = jobTime(jobKey, fields)
      end
      if finished or not ts or ts <= cutoff then
        removeJobHard(prefix, jobId)
        redis.call("ZREM", setKey, jobId)
        table.insert(deleted, jobId)
      end
    end
  end
end

redis.call("XADD", KEYS[2], "*", "event", "cleaned", "count", #deleted)
return deleted
