--[[
  Repair a job scheduler left without a pending iteration (docs/protocol.md §4.5): check, in
  the same call, that it still has none, and place one. The client found the scheduler at
  score ARGV[2] with its current iteration repeat:<id>:<score> missing, finished, or started
  longer ago than ARGV[9] (its worker step failed); it planned the iteration's opts as the
  worker step would. Nothing is written unless, now, the score is still ARGV[2], the hash is a
  job scheduler's (it has `ic`) and the current iteration is still in that condition. The
  iteration id is deterministic, so two repairs at once, or a repair racing the worker step
  (which only produces for the current iteration), leave exactly one pending iteration.

  Modes (ARGV[3]):
    "same"  the current iteration is gone and not yet due: recreate it at its slot (score and
            `ic` unchanged; it replaces the one lost);
    "next"  place the iteration after it, as the worker step does: for `every` the slot is
            computed here from the score (missed runs skipped), for a pattern it is ARGV[4];
            ZADD the new score, HINCRBY `ic`.

  Input:
    KEYS[1]  repeat
    KEYS[2]  delayed
    KEYS[3]  wait
    KEYS[4]  paused         legacy list, unused (BullMQ 6 enqueues into wait while paused)
    KEYS[5]  meta
    KEYS[6]  prioritized
    KEYS[7]  marker
    KEYS[8]  id             counter, INCRed once per iteration created
    KEYS[9]  events
    KEYS[10] pc             priority counter
    KEYS[11] active

    ARGV[1]  scheduler id
    ARGV[2]  the score the client found (the current iteration's millis), as a decimal integer
    ARGV[3]  mode: "same" or "next"
    ARGV[4]  next millis for a pattern scheduler in mode "next" ("" otherwise)
    ARGV[5]  the iteration's opts, JSON (jobId and delay are set here)
    ARGV[6]  now (ms)
    ARGV[7]  key prefix "<prefix>:{<queue>}:"
    ARGV[8]  the end date (ms) as the client read it, or "" (the hash's endDate comes first)
    ARGV[9]  grace (ms): a started iteration younger than this is left to its worker's step
    ARGV[10] optional: a JSON array of {"at": slot ms, "opts": iteration opts}, in mode "next"
             the missed slots a `run_all` policy runs (§4.6), placed oldest first before the
             next iteration, each unless its id exists (`ic` + 1 each); "" for none

  Output:
    {jobId, delay}  the iteration placed
    0               nothing to repair any more (the scheduler moved on, is gone, is paused
                    (§4.6), has its pending iteration, or its next slot is past endDate):
                    nothing written
    error           "ERR repairJobScheduler: ..." for arguments out of their range: nothing
                    written

  Events: "added", then "delayed" or "waiting" for the placed iteration.
]]
-- @include "toIntString"
-- @include "getOrSetMaxEvents"
-- @include "getJobSchedulerEveryNextMillis"
-- @include "isJobSchedulerMillis"
-- @include "placeJobSchedulerIteration"
-- @include "decodePlacements"

local q = {repeatKey = KEYS[1], delayed = KEYS[2], wait = KEYS[3], meta = KEYS[5],
           prioritized = KEYS[6], marker = KEYS[7], id = KEYS[8], events = KEYS[9], pc = KEYS[10],
           active = KEYS[11]}
local schedulerId = ARGV[1]
local mode = ARGV[3]
local now = tonumber(ARGV[6])
local prefix = ARGV[7]
local grace = tonumber(ARGV[9])

-- Validate first: Lua does not roll back, so nothing below may fail after a write.
local function refuse(what)
  return redis.error_reply("ERR repairJobScheduler: " .. what)
end
local jobOpts = cjson.decode(ARGV[5])
if type(jobOpts) ~= "table" then
  return refuse("ARGV[5] opts must be a JSON object")
end
if mode ~= "same" and mode ~= "next" then
  return refuse("ARGV[3] mode must be same or next")
end
if not isJobSchedulerMillis(tonumber(ARGV[2])) or not isJobSchedulerMillis(now)
    or not isJobSchedulerMillis(grace) then
  return refuse("ARGV[2], ARGV[6] and ARGV[9] must be whole ms a Date holds")
end
if ARGV[4] ~= "" and not isJobSchedulerMillis(tonumber(ARGV[4])) then
  return refuse("ARGV[4] next millis must be whole ms a Date holds")
end
if ARGV[8] ~= "" and not isJobSchedulerMillis(tonumber(ARGV[8])) then
  return refuse("ARGV[8] end date must be whole ms a Date holds")
end
local catchUp, badCatchUp = decodePlacements(ARGV[10])
if not catchUp then
  return refuse("ARGV[10] " .. badCatchUp)
end

-- Still the state the client planned for?
local current = redis.call("ZSCORE", q.repeatKey, schedulerId)
if not current or toIntString(tonumber(current)) ~= ARGV[2] then
  return 0
end
current = tonumber(current)
if tonumber(redis.call("ZSCORE", prefix .. "schedulers:paused", schedulerId)) == current then
  return 0
end
local schedulerKey = q.repeatKey .. ":" .. schedulerId
if redis.call("HEXISTS", schedulerKey, "ic") == 0 then
  return 0
end
local currentKey = prefix .. "repeat:" .. schedulerId .. ":" .. ARGV[2]
local state = redis.call("HMGET", currentKey, "name", "processedOn", "finishedOn")
local missing = redis.call("EXISTS", currentKey) == 0
local startedOn = tonumber(state[2])
local done = state[3] ~= false or (startedOn ~= nil and startedOn < now - grace)
if mode == "same" and not (missing and current > now) then
  return 0
end
if mode == "next" and not (missing or done) then
  return 0
end

local attrs = redis.call("HMGET", schedulerKey, "name", "data", "every", "startDate", "offset", "endDate")
local nextMillis = current
if mode == "next" then
  local repeatOpts = jobOpts["repeat"]
  if type(repeatOpts) ~= "table" then
    repeatOpts = {}
  end
  local every = tonumber(attrs[3]) or tonumber(repeatOpts["every"])
  if every then
    local phase = tonumber(attrs[5]) or tonumber(repeatOpts["offset"]) or 0
    nextMillis = getJobSchedulerEveryNextMillis(current, every, now, phase, attrs[4])
    local endDate = tonumber(attrs[6]) or tonumber(ARGV[8])
    if (endDate and nextMillis > endDate) or nextMillis > 8640000000000000 then
      return 0
    end
  else
    nextMillis = tonumber(ARGV[4])
    if not nextMillis then
      return refuse("ARGV[4] next millis is needed: the scheduler has no every")
    end
  end
end

local jobId = "repeat:" .. schedulerId .. ":" .. toIntString(nextMillis)
if mode == "next" and redis.call("EXISTS", prefix .. jobId) == 1 then
  return 0
end

local maxEvents = getOrSetMaxEvents(q.meta)
if mode == "same" then
  -- ids the lost iteration may have left behind (its hash deleted, its id still placed): the
  -- re-created one is placed once, in delayed, where a not-yet-due iteration belongs
  redis.call("ZREM", q.prioritized, jobId)
  redis.call("LREM", q.wait, 0, jobId)
end
if mode == "next" then
  for _, item in ipairs(catchUp) do
    local missedId = "repeat:" .. schedulerId .. ":" .. toIntString(item["at"])
    -- the lost current iteration's own slot is free again (its hash is gone)
    if item["at"] < nextMillis and redis.call("EXISTS", prefix .. missedId) == 0 then
      redis.call("HINCRBY", schedulerKey, "ic", 1)
      redis.call("INCR", q.id)
      redis.call("ZREM", q.delayed, missedId)
      redis.call("ZREM", q.prioritized, missedId)
      redis.call("LREM", q.wait, 0, missedId)
      placeJobSchedulerIteration(q, prefix, schedulerId, missedId, item["at"], item["opts"],
        attrs[1] or schedulerId, attrs[2] or "{}", ARGV[6], maxEvents)
    end
  end
  redis.call("ZADD", q.repeatKey, toIntString(nextMillis), schedulerId)
  redis.call("HINCRBY", schedulerKey, "ic", 1)
end
redis.call("INCR", q.id)
local delay = placeJobSchedulerIteration(q, prefix, schedulerId, jobId, nextMillis, jobOpts,
  attrs[1] or schedulerId, attrs[2] or "{}", ARGV[6], maxEvents)
return {jobId, delay}
