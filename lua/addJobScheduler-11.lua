--[[
  Create or replace a job scheduler and place its one pending iteration, atomically.

  For `every` the next slot is computed here (getJobSchedulerEveryNextMillis): a fresh schedule
  starts now (or at startDate, or at the first slot of the given offset); an upsert with the
  same `every` that can replace the pending iteration keeps its slot (a template refresh);
  a changed `every` starts afresh. For `pattern` the caller computed the next tick (ARGV[1]).
  The pending iteration is replaced only from delayed/prioritized/wait (never while running).
  A paused scheduler (§4.6) stays paused: its parked iteration is replaced by a new parked one
  (stored, in no list) and its record in <prefix>schedulers:paused moves to the new slot; a
  stale record (its score is not the scheduler's) is dropped with the iteration it parked.

  Input:
    KEYS[1]  repeat         ZSET of schedulers (score = millis of the pending iteration)
    KEYS[2]  delayed
    KEYS[3]  wait
    KEYS[4]  paused         legacy list (BullMQ 6 keeps paused jobs in wait)
    KEYS[5]  meta
    KEYS[6]  prioritized
    KEYS[7]  marker
    KEYS[8]  id             counter, INCRed once per iteration created
    KEYS[9]  events
    KEYS[10] pc             priority counter
    KEYS[11] active

    ARGV[1]  next millis for a pattern scheduler ("" for every)
    ARGV[2]  scheduler options, JSON: name, tz?, pattern?, every?, limit?, startDate?, endDate?,
             offset? (the user's offset only), emqMisfire? ("skip" or "run_all"),
             emqMisfireGraceMs?
    ARGV[3]  scheduler id
    ARGV[4]  template data, JSON text (stored verbatim)
    ARGV[5]  template opts, JSON text in the stored (short) form
    ARGV[6]  the iteration's opts, JSON (jobId and delay are set here)
    ARGV[7]  now (ms)
    ARGV[8]  key prefix "<prefix>:{<queue>}:"
    ARGV[9]  producer job key or "" (unused since BullMQ 6: no nrjid)
    ARGV[10] EchoMQ's own, optional: "1" to pause the scheduler in the same step (its new
             iteration parked, §4.6)

  Output:
    {jobId, delay}  the iteration created (delay in ms, 0 when it went to wait/prioritized)
    0               nothing scheduled: the next `every` slot is past endDate, or past what a
                    JavaScript Date holds (8.64e15 ms); nothing written
    -10             pattern scheduler: the iteration id already exists
    -11             every scheduler: 32 consecutive slots are taken
    error           "ERR addJobScheduler: ..." for arguments out of their range (the client
                    checks them first): refused before the first write, nothing written

  Events: "added", then "delayed" or "waiting" for the new iteration. The replaced iteration
  writes none.
]]
-- @include "toIntString"
-- @include "getOrSetMaxEvents"
-- @include "getJobSchedulerEveryNextMillis"
-- @include "isJobSchedulerMillis"
-- @include "locatePendingIteration"
-- @include "removePendingIteration"
-- @include "storeJobScheduler"
-- @include "placeJobSchedulerIteration"

local q = {repeatKey = KEYS[1], delayed = KEYS[2], wait = KEYS[3], paused = KEYS[4], meta = KEYS[5],
           prioritized = KEYS[6], marker = KEYS[7], id = KEYS[8], events = KEYS[9], pc = KEYS[10],
           active = KEYS[11]}
local sched = cjson.decode(ARGV[2])
local schedulerId = ARGV[3]
local templateData = ARGV[4]
local templateOpts = ARGV[5]
local jobOpts = cjson.decode(ARGV[6])
local now = tonumber(ARGV[7])
local prefix = ARGV[8]

-- Validate first: Lua does not roll back, so nothing below may fail after a write.
local function refuse(what)
  return redis.error_reply("ERR addJobScheduler: " .. what)
end
if type(sched) ~= "table" or type(jobOpts) ~= "table" then
  return refuse("ARGV[2] and ARGV[6] must be JSON objects")
end
if type(sched["name"]) ~= "string" then
  return refuse("name must be a string")
end
for _, field in ipairs({"tz", "pattern"}) do
  if sched[field] ~= nil and type(sched[field]) ~= "string" then
    return refuse(field .. " must be a string")
  end
end
if sched["every"] ~= nil and not (isJobSchedulerMillis(sched["every"]) and sched["every"] >= 1) then
  return refuse("every must be whole ms in 1..8640000000000000")
end
if sched["every"] == nil and not isJobSchedulerMillis(tonumber(ARGV[1])) then
  return refuse("ARGV[1] next millis must be whole ms a Date holds")
end
for _, field in ipairs({"startDate", "endDate"}) do
  if sched[field] ~= nil and not isJobSchedulerMillis(sched[field]) then
    return refuse(field .. " must be whole ms a Date holds")
  end
end
if sched["offset"] ~= nil and not (isJobSchedulerMillis(sched["offset"]) and sched["offset"] >= 0) then
  return refuse("offset must be whole ms >= 0")
end
if sched["limit"] ~= nil and not (isJobSchedulerMillis(sched["limit"]) and sched["limit"] >= 1
    and sched["limit"] <= 9007199254740991) then
  return refuse("limit must be a whole number in 1..2^53-1")
end
if not isJobSchedulerMillis(now) then
  return refuse("ARGV[7] now must be whole ms a Date holds")
end
if sched["emqMisfire"] ~= nil and sched["emqMisfire"] ~= "skip" and sched["emqMisfire"] ~= "run_all" then
  return refuse("emqMisfire must be skip or run_all")
end
if sched["emqMisfireGraceMs"] ~= nil and not (isJobSchedulerMillis(sched["emqMisfireGraceMs"])
    and sched["emqMisfireGraceMs"] >= 0) then
  return refuse("emqMisfireGraceMs must be whole ms >= 0")
end

local schedulerKey = q.repeatKey .. ":" .. schedulerId
local prevMillis = redis.call("ZSCORE", q.repeatKey, schedulerId)
local pendingId, pendingAt
if prevMillis then
  prevMillis = tonumber(prevMillis)
  pendingId = "repeat:" .. schedulerId .. ":" .. toIntString(prevMillis)
  pendingAt = locatePendingIteration(q, pendingId)
end
local parkedSet = prefix .. "schedulers:paused"
local parkedScore = redis.call("ZSCORE", parkedSet, schedulerId)
local paused = prevMillis ~= nil and parkedScore ~= false and tonumber(parkedScore) == prevMillis
local pausing = ARGV[10] == "1"
if paused and not pendingAt and redis.call("EXISTS", prefix .. pendingId) == 1
    and not redis.call("HGET", prefix .. pendingId, "processedOn") then
  pendingAt = "parked"
end

local every = tonumber(sched["every"])
local nextMillis
local offset = 0
if every then
  local stored = redis.call("HMGET", schedulerKey, "every", "offset")
  local continuing = prevMillis ~= nil and tonumber(stored[1]) == every
  if continuing and pendingAt then
    -- same every, replaceable pending iteration: keep its slot, refresh the template
    nextMillis = prevMillis
    offset = tonumber(sched["offset"]) or tonumber(stored[2]) or prevMillis % every
  else
    local phase = tonumber(sched["offset"]) or (continuing and tonumber(stored[2])) or 0
    local base = nil
    if continuing then base = prevMillis end
    nextMillis, offset = getJobSchedulerEveryNextMillis(base, every, now, phase, sched["startDate"])
  end
else
  nextMillis = tonumber(ARGV[1])
end

-- A slot is taken when its job exists, unless it is the pending iteration about to be replaced.
local function taken(id)
  if pendingAt and id == pendingId then
    return false
  end
  return redis.call("EXISTS", prefix .. id) == 1
end

local jobId = "repeat:" .. schedulerId .. ":" .. toIntString(nextMillis)
if taken(jobId) then
  if not every then
    return -10
  end
  local scans = 0
  repeat
    nextMillis = nextMillis + every
    jobId = "repeat:" .. schedulerId .. ":" .. toIntString(nextMillis)
    scans = scans + 1
  until not taken(jobId) or scans >= 32
  if taken(jobId) then
    return -11
  end
end

-- Unlike BullMQ, an every iteration past endDate is never scheduled (a pattern's cannot be:
-- the caller found no tick before endDate and did not call), nor one no Date could hold.
local endDate = tonumber(sched["endDate"])
if every and ((endDate and nextMillis > endDate) or nextMillis > 8640000000000000) then
  return 0
end

local maxEvents = getOrSetMaxEvents(q.meta)
if pendingAt then
  removePendingIteration(q, prefix, pendingId, pendingAt)
end
if parkedScore and not paused then
  local staleId = "repeat:" .. schedulerId .. ":" .. toIntString(tonumber(parkedScore))
  if staleId ~= jobId and not locatePendingIteration(q, staleId)
      and not redis.call("HGET", prefix .. staleId, "processedOn") then
    removeJobKeys(prefix .. staleId)
  end
  redis.call("ZREM", parkedSet, schedulerId)
end
if paused or pausing then
  redis.call("ZADD", parkedSet, toIntString(nextMillis), schedulerId)
end

storeJobScheduler(q.repeatKey, schedulerKey, schedulerId, nextMillis, sched, offset, templateOpts, templateData)
redis.call("INCR", q.id)

local delay = placeJobSchedulerIteration(q, prefix, schedulerId, jobId, nextMillis, jobOpts, sched["name"],
  templateData, ARGV[7], maxEvents, paused or pausing)
return {jobId, delay}
