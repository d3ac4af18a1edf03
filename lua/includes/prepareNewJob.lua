--[[
  The common start of every add script (flat ARGV layout shared by the four add scripts):
    ARGV[1] key prefix "<prefix>:{<queue>}:"   ARGV[2] custom job id or ""   ARGV[3] name
    ARGV[4] timestamp (ms)                     ARGV[5] parent key or ""
    ARGV[6] parent dependencies key or ""      ARGV[7] parent JSON {id, queueKey} or ""
    ARGV[8] repeat job key (rjk) or ""         ARGV[9] deduplication key or ""
    ARGV[10] data JSON                         ARGV[11] opts JSON (protocol names)
    ARGV[12] the highest job id this producer was handed, or "" / absent (docs/protocol.md §1.4)
    ARGV[13] how far past it to move the counter when the counter is not above it
    ARGV[14] "1": the producer saw its master move since its last add, so ids other producers
             were handed may be lost too: move the counter past what the INCR gave as well
  Checks the parent exists (-5) and that an existing custom-id job is not another live
  parent's child (-7), both before any write (includes/newJobRefusal.lua), then INCRs the id
  counter (every add that is not refused does, even with a custom id), resolves the job id and
  handles an existing custom id.
  When ARGV[12] names an id at or above what the INCR gave (the counter went back: a failover or
  a restart lost writes), or ARGV[14] is "1", the counter is SET to the larger of the two plus
  ARGV[13] and meta `idGap` gets "<what the INCR gave>:<what it was moved to>" appended (a comma
  list of the last 32 such ranges: the ids no job got, for the queue's other producers to find
  theirs in); the script then returns {jobId, <what the INCR gave>} instead of jobId
  (rolledBack below).
  Returns
  jobId, jobKey, maxEvents, opts (decoded), earlyResult, rolledBack; when earlyResult is not nil
  the script returns it as is.
]]
-- @include "getOrSetMaxEvents"
-- @include "handleDuplicatedJob"
-- @include "newJobRefusal"
-- What an add script returns: its result, with the value the counter went back to when it did.
local function withRollback(result, rolledBack)
  if rolledBack and type(result) == "string" then
    return {result, rolledBack}
  end
  return result
end

local function prepareNewJob(idKey, metaKey, completedKey, eventsKey)
  local keyPrefix, customId, parentKey = ARGV[1], ARGV[2], ARGV[5]
  local refused = newJobRefusal(keyPrefix, customId, parentKey, keyExists)
  if refused then
    return nil, nil, nil, nil, refused, nil
  end
  local counter = redis.call("INCR", idKey)
  local rolledBack
  local highest = tonumber(ARGV[12])
  if (highest and counter <= highest) or ARGV[14] == "1" then
    -- The counter went back (a failover or a restart lost writes): ids this producer was handed
    -- would name new jobs. Move it past them, and past what other producers may have had.
    rolledBack = counter
    counter = math.max(counter, highest or 0) + (tonumber(ARGV[13]) or 1)
    redis.call("SET", idKey, counter)
    -- the ids no job got, newest last, the last 32 moves: every producer that saw the move
    -- reads them, however many adds came between two producers' moves
    local gaps = {}
    for gap in string.gmatch(redis.call("HGET", metaKey, "idGap") or "", "[^,]+") do
      table.insert(gaps, gap)
    end
    table.insert(gaps, rolledBack .. ":" .. counter)
    while #gaps > 32 do
      table.remove(gaps, 1)
    end
    redis.call("HSET", metaKey, "idGap", table.concat(gaps, ","))
  end
  local maxEvents = getOrSetMaxEvents(metaKey)
  local opts = cjson.decode(ARGV[11])
  local jobId = customId
  if customId == "" then
    jobId = tostring(counter)
  end
  local jobKey = keyPrefix .. jobId
  if customId ~= "" and redis.call("EXISTS", jobKey) == 1 then
    return jobId, jobKey, maxEvents, opts,
      handleDuplicatedJob(jobKey, jobId, parentKey, ARGV[7], ARGV[6], completedKey, eventsKey, maxEvents), rolledBack
  end
  return jobId, jobKey, maxEvents, opts, nil, rolledBack
end
