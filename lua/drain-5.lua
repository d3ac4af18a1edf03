--[[
  Drain a queue: delete every job that is waiting (wait, the legacy paused list, prioritized)
  and, when asked, every delayed job. Active, completed and failed jobs stay, and so does the
  pending iteration of each job scheduler (the schedule would stop otherwise).

  Input:
    KEYS[1] wait   KEYS[2] paused (legacy)   KEYS[3] delayed   KEYS[4] prioritized
    KEYS[5] repeat (job schedulers zset)
    ARGV[1] key prefix "<base>:"   ARGV[2] "1" to delete delayed jobs too

  Output:
    the number of jobs deleted

  Events: none (as BullMQ).
]]
-- @include "toIntString"
-- @include "removeJobHard"
local prefix = ARGV[1]
local keep = {}
local schedulers = redis.call("ZRANGE", KEYS[5], 0, -1, "WITHSCORES")
for i = 1, #schedulers, 2 do
  keep["repeat:" .. schedulers[i] .. ":" .. toIntString(tonumber(schedulers[i + 1]))] = true
end

local count = 0
local function drainList(listKey)
  local ids = redis.call("LRANGE", listKey, 0, -1)
  local survivors = {}
  for _, jobId in ipairs(ids) do
    if keep[jobId] then
      table.insert(survivors, jobId)
    else
      removeJobHard(prefix, jobId)
      count = count + 1
    end
  end
  redis.call("DEL", listKey)
  if #survivors > 0 then
    redis.call("RPUSH", listKey, unpack(survivors))
  end
end

local function drainSet(setKey)
  for _, jobId in ipairs(redis.call("ZRANGE", setKey, 0, -1)) do
    if not keep[jobId] then
      removeJobHard(prefix, jobId)
      redis.call("ZREM", setKey, jobId)
      count = count + 1
    end
  end
end

drainList(KEYS[1])
drainList(KEYS[2])
if ARGV[2] == "1" then
  drainSet(KEYS[3])
end
drainSet(KEYS[4])
return count
