--[[
  Apply a job's deduplication options before it is stored. Returns the id of the job that
  keeps the deduplication id (the new job is then discarded), or nil when the new job should
  be stored (it now owns the id).

  Modes, as BullMQ 6.7 runs them:
    simple (no ttl)  the owner keeps the id until it finishes or is removed;
    ttl              the id expires ttl ms after the owner was added;
    extend           a hit restarts the ttl window (the owner stays);
    replace          a hit on a still-delayed owner removes it ("removed" prev=delayed) and the
                     new job takes over; an owner that already left delayed is kept silently.
  An id whose owner vanished without clearing the key (no ttl, no job hash) is taken over.
  allowReplace is false for parent jobs (BullMQ's addParentJob never replaces).
]]
-- @include "setDeduplicationKey"
-- @include "removeJobKeys"
local function deduplicateJob(de, jobId, deduplicationKey, delayedKey, eventsKey, maxEvents,
                              keyPrefix, allowReplace)
  local deduplicationId = de and de["id"]
  if not deduplicationId then
    return nil
  end
  local ttl = tonumber(de["ttl"])
  local owner = redis.call("GET", deduplicationKey)
  if owner and redis.call("PTTL", deduplicationKey) == -1
      and redis.call("EXISTS", keyPrefix .. owner) == 0 then
    owner = nil
  end
  if not owner then
    setDeduplicationKey(deduplicationKey, jobId, ttl)
    return nil
  end
  if allowReplace and de["replace"] then
    if redis.call("ZREM", delayedKey, owner) == 0 then
      return owner
    end
    removeJobKeys(keyPrefix .. owner)
    redis.call("XADD", eventsKey, "*", "event", "removed", "jobId", owner, "prev", "delayed")
    redis.call("XADD", eventsKey, "MAXLEN", "~", maxEvents, "*", "event", "deduplicated",
      "jobId", jobId, "deduplicationId", deduplicationId, "deduplicatedJobId", owner)
    if ttl and ttl > 0 and not de["extend"] then
      redis.call("SET", deduplicationKey, jobId, "KEEPTTL")
    else
      setDeduplicationKey(deduplicationKey, jobId, ttl)
    end
    return nil
  end
  if ttl and ttl > 0 and de["extend"] then
    setDeduplicationKey(deduplicationKey, owner, ttl)
  end
  redis.call("XADD", eventsKey, "MAXLEN", "~", maxEvents, "*", "event", "deduplicated",
    "jobId", owner, "deduplicationId", deduplicationId, "deduplicatedJobId", jobId)
  return owner
end
