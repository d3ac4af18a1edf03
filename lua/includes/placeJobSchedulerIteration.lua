--[[
  Store and place one iteration of a job scheduler (docs/protocol.md §4.4): jobOpts gets its
  jobId and delay (nextMillis - timestamp, at least 0) and is re-encoded with cjson; the hash is
  written with the scheduler id as rjk (and deid when the template deduplicates, as BullMQ's
  storeJob does), then the job goes to delayed, prioritized or wait, unless `parked` (a paused
  scheduler's iteration, §4.6: stored, in no list). Returns the delay.
  q is the queue's key table (wait, delayed, prioritized, pc, marker, meta, active, events).
]]
-- @include "toIntString"
-- @include "storeJob"
-- @include "enqueueStoredJob"
local function placeJobSchedulerIteration(q, prefix, schedulerId, jobId, nextMillis, jobOpts, name, data,
                                          timestamp, maxEvents, parked)
  local delay = nextMillis - tonumber(timestamp)
  if delay < 0 then
    delay = 0
  end
  jobOpts["jobId"] = jobId
  jobOpts["delay"] = delay
  local priority = tonumber(jobOpts["priority"]) or 0
  local dedup = jobOpts["de"]
  local dedupId = type(dedup) == "table" and dedup["id"] or nil
  storeJob(q.events, prefix .. jobId, jobId, name, data, cjson.encode(jobOpts), timestamp, toIntString(delay),
    priority, schedulerId, dedupId)
  if not parked then
    enqueueStoredJob(q, jobId, timestamp, delay, priority, jobOpts["lifo"], maxEvents)
  end
  return delay
end
