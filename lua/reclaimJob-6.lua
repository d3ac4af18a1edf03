--[[
  reclaimJob: after the worker's connection moved to a new master (a failover), hold again a job
  the worker took, if the new master lost the take (docs/protocol.md §3.5, "After a failover").
  The take (moveToActive, or the fetch-next of a finish) may have reached the old master only:
  here the job is still waiting, or active without its lock, and another worker would take it
  and run it a second time. The worker sends this for every job it runs, and before each finish
  it sends again (master_moves.py). EchoMQ's own script (BullMQ has none).

  Which take is the worker's is told by the job hash as the take left it: processedOn (the
  take's timestamp) and ats (attempts started, counted by the take), and which job by its
  timestamp (when it was added: an id handed again after a restart that lost everything names
  another job, added at another time). A job waiting whose ats is one below the take's and whose
  processedOn is not the take's is one whose take is lost: it is taken again. A job waiting
  otherwise has moved on since (it finished and was retried): it is left alone.

  Input:
    KEYS[1]  wait            KEYS[2]  active          KEYS[3]  prioritized
    KEYS[4]  delayed         KEYS[5]  events          KEYS[6]  job hash
    ARGV[1]  jobId
    ARGV[2]  lock token (the one the worker holds the job with)
    ARGV[3]  lock duration (ms)
    ARGV[4]  processedOn as the take wrote it
    ARGV[5]  ats as the take left it
    ARGV[6]  the job's timestamp (when it was added) as the take read it

  Output:
    0   the lock is this token's: the new master has the take, nothing written
    1   the job is active with the take's processedOn but without a lock (it expired there):
        locked again with this token
    2   the take is lost and the job waiting (wait, prioritized or delayed): moved to active and
        locked, processedOn and ats as the take left them, and the "active" prev=waiting event
        the lost take had written
    -1 no job; -3 the job moved on (finished, retried, taken by another take whose lock is
    gone), or it is another job (added at another time): left alone; -6 another token's lock:
    left alone. Nothing is written for these.

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
local stamp = redis.call("HMGET", jobKey, "processedOn", "ats", "timestamp")
if not stamp[3] or stamp[3] ~= ARGV[6] then
  return -3
end
if stamp[1] == ARGV[4] then
  if redis.call("LREM", KEYS[2], 1, jobId) == 0 then
    return -3
  end
  redis.call("LPUSH", KEYS[2], jobId)
  redis.call("SET", lockKey, token, "PX", ARGV[3])
  return 1
end
local taken = tonumber(ARGV[5])
if not taken or (tonumber(stamp[2]) or 0) ~= taken - 1 then
  return -3
end
if redis.call("LREM", KEYS[1], 1, jobId) == 0 and redis.call("ZREM", KEYS[3], jobId) == 0
    and redis.call("ZREM", KEYS[4], jobId) == 0 then
  return -3
end
redis.call("LPUSH", KEYS[2], jobId)
redis.call("SET", lockKey, token, "PX", ARGV[3])
redis.call("HSET", jobKey, "processedOn", ARGV[4], "ats", ARGV[5])
redis.call("XADD", KEYS[5], "*", "event", "active", "jobId", jobId, "prev", "waiting")
return 2
