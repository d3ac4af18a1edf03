--[[
  reclaimJob: after the worker's connection moved to a new master (a failover), hold again a job
  the worker is running, if the new master lost the take (docs/protocol.md §3.5, "After a
  failover"). The take (moveToActive, or the fetch-next of a finish) reached the old master only:
  here the job is still in wait, prioritized or delayed, or active without its lock, and another
  worker would take it and run it a second time. EchoMQ's own script (BullMQ has none).

  Input:
    KEYS[1]  wait            KEYS[2]  active          KEYS[3]  prioritized
    KEYS[4]  delayed         KEYS[5]  events          KEYS[6]  job hash
    ARGV[1]  jobId
    ARGV[2]  lock token (the one the worker holds the job with)
    ARGV[3]  lock duration (ms)
    ARGV[4]  timestamp (ms): processedOn, as the lost take wrote it

  Output:
    0   the lock is this token's: the new master has the take, nothing written
    1   the job was active without a lock: locked again with this token
    2   the job was waiting (wait, prioritized or delayed): moved to active and locked, ats + 1,
        processedOn, and the "active" prev=waiting event the lost take had written
    -1 no job, -3 not in a state a take leaves or comes from (completed, failed,
    waiting-children): left alone, -6 another worker's lock: left alone

  Events: "active" (jobId, prev=waiting) for 2.
]]
local jobKey, jobId, token = KEYS[6], ARGV[1], ARGV[2]
local lockKey = jobKey .. ":lock"
local held = redis.call("GET", lockKey)
if held == token then
  return 0
end
if held then
  return -6
end
if redis.call("EXISTS", jobKey) == 0 then
  return -1
end
if redis.call("LREM", KEYS[2], 1, jobId) > 0 then
  redis.call("LPUSH", KEYS[2], jobId)
  redis.call("SET", lockKey, token, "PX", ARGV[3])
  return 1
end
if redis.call("LREM", KEYS[1], 1, jobId) == 0 and redis.call("ZREM", KEYS[3], jobId) == 0
    and redis.call("ZREM", KEYS[4], jobId) == 0 then
  return -3
end
redis.call("LPUSH", KEYS[2], jobId)
redis.call("SET", lockKey, token, "PX", ARGV[3])
redis.call("HSET", jobKey, "processedOn", ARGV[4])
redis.call("HINCRBY", jobKey, "ats", 1)
redis.call("XADD", KEYS[5], "*", "event", "active", "jobId", jobId, "prev", "waiting")
return 2
