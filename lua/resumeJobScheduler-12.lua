--[[
  Resume a paused job scheduler (docs/protocol.md §4.6): put its next run back as the client
  planned it by the scheduler's missed-run policy, and end the pause, in one step. Nothing is
  written unless the scheduler is still paused at the score the client read (ARGV[2]) and its
  parked iteration is still in the state the client planned for (parked: in no list, never
  started; or, for "none", not parked).

  The parked iteration (ARGV[3]):
    "requeue"  it runs: back into delayed when its slot is still to come, else into wait
               (prioritized when it has a priority);
    "drop"     it does not run (skipped by the policy): its keys are deleted;
    "none"     there is none to put back (it was running when the pause came, or is gone).
  Then each new iteration of ARGV[4] is placed, oldest first (missed slots a `run_all` policy
  runs, then the next slot); the last one becomes the scheduler's current iteration (ZADD
  repeat, `ic` + 1 per iteration placed, `id` INCRed per iteration).

  Input:
    KEYS[1]  repeat
    KEYS[2]  delayed
    KEYS[3]  wait
    KEYS[4]  paused             legacy list, unused
    KEYS[5]  meta
    KEYS[6]  prioritized
    KEYS[7]  marker
    KEYS[8]  id
    KEYS[9]  events
    KEYS[10] pc
    KEYS[11] active
    KEYS[12] schedulers:paused

    ARGV[1]  scheduler id
    ARGV[2]  the parked score the client read, as a decimal integer
    ARGV[3]  "requeue", "drop" or "none"
    ARGV[4]  JSON array of {"at": slot ms, "opts": iteration opts} (jobId and delay set here)
    ARGV[5]  now (ms)
    ARGV[6]  key prefix "<prefix>:{<queue>}:"

  Output:
    1   resumed
    0   not paused: nothing written
    -1  no such scheduler: nothing written
    -2  the state changed since the client read it (plan again): nothing written
    error "ERR resumeJobScheduler: ..." for arguments out of their range: nothing written

  Events: "waiting"/"delayed" for a requeued iteration; "added" then "delayed"/"waiting" for
  each new one.
]]
-- @include "toIntString"
-- @include "getOrSetMaxEvents"
-- @include "isJobSchedulerMillis"
-- @include "removeJobKeys"
-- @include "enqueueStoredJob"
-- @include "placeJobSchedulerIteration"
-- @include "decodePlacements"

local q = {repeatKey = KEYS[1], delayed = KEYS[2], wait = KEYS[3], meta = KEYS[5], prioritized = KEYS[6],
           marker = KEYS[7], id = KEYS[8], events = KEYS[9], pc = KEYS[10], active = KEYS[11]}
local parkedSet = KEYS[12]
local schedulerId = ARGV[1]
local mode = ARGV[3]
local now = tonumber(ARGV[5])
local prefix = ARGV[6]

local function refuse(what)
  return redis.error_reply("ERR resumeJobScheduler: " .. what)
end
local placements, badPlacements = decodePlacements(ARGV[4])
if not placements then
  return refuse("ARGV[4] " .. badPlacements)
end
if mode ~= "requeue" and mode ~= "drop" and mode ~= "none" then
  return refuse("ARGV[3] must be requeue, drop or none")
end
if not isJobSchedulerMillis(now) or not isJobSchedulerMillis(tonumber(ARGV[2])) then
  return refuse("ARGV[2] and ARGV[5] must be whole ms a Date holds")
end

local schedulerKey = q.repeatKey .. ":" .. schedulerId
local score = redis.call("ZSCORE", q.repeatKey, schedulerId)
if not score or not redis.call("HGET", schedulerKey, "ic") then
  return -1
end
local parked = redis.call("ZSCORE", parkedSet, schedulerId)
if not parked or tonumber(parked) ~= tonumber(score) then
  return 0
end
if toIntString(tonumber(score)) ~= ARGV[2] then
  return -2
end
local parkedId = "repeat:" .. schedulerId .. ":" .. ARGV[2]
local parkedKey = prefix .. parkedId
local isParked = redis.call("EXISTS", parkedKey) == 1 and not redis.call("HGET", parkedKey, "processedOn")
  and not redis.call("ZSCORE", q.delayed, parkedId) and not redis.call("ZSCORE", q.prioritized, parkedId)
  and not redis.call("LPOS", q.wait, parkedId) and not redis.call("LPOS", q.active, parkedId)
if (mode == "none") == isParked then
  return -2
end
for _, item in ipairs(placements) do
  if redis.call("EXISTS", prefix .. "repeat:" .. schedulerId .. ":" .. toIntString(item["at"])) == 1 then
    return -2
  end
end

local maxEvents = getOrSetMaxEvents(q.meta)
redis.call("ZREM", parkedSet, schedulerId)
if mode == "requeue" then
  local slot = tonumber(ARGV[2])
  local delay = slot - now
  if delay < 0 then
    delay = 0
  end
  enqueueStoredJob(q, parkedId, now, delay, redis.call("HGET", parkedKey, "priority"), false, maxEvents)
elseif mode == "drop" then
  removeJobKeys(parkedKey)
end
if #placements > 0 then
  local attrs = redis.call("HMGET", schedulerKey, "name", "data")
  for _, item in ipairs(placements) do
    local jobId = "repeat:" .. schedulerId .. ":" .. toIntString(item["at"])
    redis.call("INCR", q.id)
    redis.call("HINCRBY", schedulerKey, "ic", 1)
    placeJobSchedulerIteration(q, prefix, schedulerId, jobId, item["at"], item["opts"], attrs[1] or schedulerId,
      attrs[2] or "{}", ARGV[5], maxEvents)
  end
  redis.call("ZADD", q.repeatKey, toIntString(placements[#placements]["at"]), schedulerId)
end
return 1
