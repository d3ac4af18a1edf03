--[[
  The common start of every add script (flat ARGV layout shared by the four add scripts):
    ARGV[1] key prefix "<prefix>:{<queue>}:"   ARGV[2] custom job id or ""   ARGV[3] name
    ARGV[4] timestamp (ms)                     ARGV[5] parent key or ""
    ARGV[6] parent dependencies key or ""      ARGV[7] parent JSON {id, queueKey} or ""
    ARGV[8] repeat job key (rjk) or ""         ARGV[9] deduplication key or ""
    ARGV[10] data JSON                         ARGV[11] opts JSON (protocol names)
  Checks the parent exists (-5) and that an existing custom-id job is not another live
  parent's child (-7), both before any write (includes/newJobRefusal.lua), then INCRs the id
  counter (every add that is not refused does, even with a custom id), resolves the job id and
  handles an existing custom id. Returns
  jobId, jobKey, maxEvents, opts (decoded), earlyResult; when earlyResult is not nil the
  script returns it as is.
]]
-- @include "getOrSetMaxEvents"
-- @include "handleDuplicatedJob"
-- @include "newJobRefusal"
local function prepareNewJob(idKey, metaKey, completedKey, eventsKey)
  local keyPrefix, customId, parentKey = ARGV[1], ARGV[2], ARGV[5]
  local refused = newJobRefusal(keyPrefix, customId, parentKey, keyExists)
  if refused then
    return nil, nil, nil, nil, refused
  end
  local counter = redis.call("INCR", idKey)
  local maxEvents = getOrSetMaxEvents(metaKey)
  local opts = cjson.decode(ARGV[11])
  local jobId = customId
  if customId == "" then
    jobId = tostring(counter)
  end
  local jobKey = keyPrefix .. jobId
  if customId ~= "" and redis.call("EXISTS", jobKey) == 1 then
    return jobId, jobKey, maxEvents, opts,
      handleDuplicatedJob(jobKey, jobId, parentKey, ARGV[7], ARGV[6], completedKey, eventsKey, maxEvents)
  end
  return jobId, jobKey, maxEvents, opts, nil
end
