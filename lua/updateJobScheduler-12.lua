--[[
  The worker-side step: the scheduler's current iteration has just become active, so place the
  next one. Only that iteration may produce (its id must be repeat:<id>:<current score>), so a
  retried, stalled or re-run older iteration produces nothing; the next id is deterministic,
  so running this twice for the same iteration writes "duplicated" the second time.

  For `every` the next slot is computed here from the current score (the catch-up after missed
  runs keeps the stored phase); for `pattern` the caller computed it (ARGV[1]). Name and data
  come from the scheduler hash (data "{}" when it has none), the opts from the caller.

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
    KEYS[11] job     the producer (the iteration that became active; unused since BullMQ 6)
    KEYS[12] active

    ARGV[1]  next millis for a pattern scheduler ("" for every)
    ARGV[2]  scheduler id
    ARGV[3]  the producer's data (unused since BullMQ 6: the hash's data is used)
    ARGV[4]  the new iteration's opts, JSON (jobId and delay are set here)
    ARGV[5]  now (ms)
    ARGV[6]  key prefix "<prefix>:{<queue>}:"
    ARGV[7]  producer job id (the iteration that just became active)
    ARGV[8]  the end date (ms) as the client read it from the producer's opts, or "": the
             every-slot check uses the hash's endDate, else this one
    ARGV[9]  EchoMQ's own, optional: a JSON array of {"at": slot ms, "opts": iteration opts},
             the missed slots a `run_all` policy runs (§4.6), placed oldest first before the
             next iteration, each unless its id exists (`ic` + 1 each)

  Output:
    {jobId, delay}  the iteration created
    nil             nothing produced: scheduler gone or paused (§4.6: its record in
                    <prefix>schedulers:paused has the current score), producer is not the current iteration,
                    the next iteration already exists, or (every) the next slot is past endDate
                    or past what a JavaScript Date holds (8.64e15 ms)
    error           "ERR updateJobScheduler: ..." for arguments out of their range (the client
                    checks them first): refused before the first write, nothing written

  Events: "added" then "delayed"/"waiting" for the new iteration; "duplicated" (jobId = the
  next id) when it already exists.
]]
-- @include "toIntString"
-- @include "getOrSetMaxEvents"
-- @include "getJobSchedulerEveryNextMillis"
-- @include "isJobSchedulerMillis"
-- @include "placeJobSchedulerIteration"
-- @include "decodePlacements"

local q = {repeatKey = KEYS[1], delayed = KEYS[2], wait = KEYS[3], meta = KEYS[5],
           prioritized = KEYS[6], marker = KEYS[7], id = KEYS[8], events = KEYS[9], pc = KEYS[10],
           active = KEYS[12]}
local schedulerId = ARGV[2]
local now = tonumber(ARGV[5])
local prefix = ARGV[6]
local producerId = ARGV[7]

-- Validate first: Lua does not roll back, so nothing below may fail after a write.
local function refuse(what)
  return redis.error_reply("ERR updateJobScheduler: " .. what)
end
local jobOpts = cjson.decode(ARGV[4])
if type(jobOpts) ~= "table" then
  return refuse("ARGV[4] opts must be a JSON object")
end
if ARGV[1] ~= "" and not isJobSchedulerMillis(tonumber(ARGV[1])) then
  return refuse("ARGV[1] next millis must be whole ms a Date holds")
end
if not isJobSchedulerMillis(now) then
  return refuse("ARGV[5] now must be whole ms a Date holds")
end
if ARGV[8] and ARGV[8] ~= "" and not isJobSchedulerMillis(tonumber(ARGV[8])) then
  return refuse("ARGV[8] end date must be whole ms a Date holds")
end

local current = redis.call("ZSCORE", q.repeatKey, schedulerId)
if not current then
  return nil
end
current = tonumber(current)
if producerId ~= "repeat:" .. schedulerId .. ":" .. toIntString(current) then
  return nil
end
local catchUp, badCatchUp = decodePlacements(ARGV[9])
if not catchUp then
  return refuse("ARGV[9] " .. badCatchUp)
end
if tonumber(redis.call("ZSCORE", prefix .. "schedulers:paused", schedulerId)) == current then
  return nil
end

local schedulerKey = q.repeatKey .. ":" .. schedulerId
local attrs = redis.call("HMGET", schedulerKey, "name", "data", "every", "startDate", "offset", "endDate")
local repeatOpts = jobOpts["repeat"]
if type(repeatOpts) ~= "table" then
  repeatOpts = {}
end

local every = tonumber(attrs[3]) or tonumber(repeatOpts["every"])
local nextMillis
if every then
  local phase = tonumber(attrs[5]) or tonumber(repeatOpts["offset"]) or 0
  nextMillis = getJobSchedulerEveryNextMillis(current, every, now, phase, attrs[4])
  local endDate = tonumber(attrs[6]) or tonumber(ARGV[8])
  if (endDate and nextMillis > endDate) or nextMillis > 8640000000000000 then
    return nil
  end
else
  nextMillis = tonumber(ARGV[1])
  if not nextMillis then
    return refuse("ARGV[1] next millis is needed: the scheduler has no every")
  end
end

local jobId = "repeat:" .. schedulerId .. ":" .. toIntString(nextMillis)
local maxEvents = getOrSetMaxEvents(q.meta)
if redis.call("EXISTS", prefix .. jobId) == 1 then
  redis.call("XADD", q.events, "MAXLEN", "~", maxEvents, "*", "event", "duplicated", "jobId", jobId)
  return nil
end

for _, item in ipairs(catchUp) do
  local missedId = "repeat:" .. schedulerId .. ":" .. toIntString(item["at"])
  if item["at"] < nextMillis and redis.call("EXISTS", prefix .. missedId) == 0 then
    redis.call("HINCRBY", schedulerKey, "ic", 1)
    redis.call("INCR", q.id)
    placeJobSchedulerIteration(q, prefix, schedulerId, missedId, item["at"], item["opts"],
      attrs[1] or schedulerId, attrs[2] or "{}", ARGV[5], maxEvents)
  end
end
redis.call("ZADD", q.repeatKey, toIntString(nextMillis), schedulerId)
redis.call("HINCRBY", schedulerKey, "ic", 1)
redis.call("INCR", q.id)

local delay = placeJobSchedulerIteration(q, prefix, schedulerId, jobId, nextMillis, jobOpts,
  attrs[1] or schedulerId, attrs[2] or "{}", ARGV[5], maxEvents)
return {jobId, delay}
