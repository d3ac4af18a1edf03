--[[
  Append a line to a job's log; with keepLogs only the newest keepLogs lines are kept.

  Input:
    KEYS[1] job       KEYS[2] job:logs
    ARGV[1] job id    ARGV[2] log line    ARGV[3] keepLogs, or "" to keep every line

  Output:
    n   the number of lines the log now holds
    -1  the job does not exist

  Events: none.
]]
if redis.call("EXISTS", KEYS[1]) == 0 then
  return -1
end
local count = redis.call("RPUSH", KEYS[2], ARGV[2])
if ARGV[3] ~= "" then
  local keep = tonumber(ARGV[3])
  redis.call("LTRIM", KEYS[2], -keep, -1)
  return math.min(keep, count)
end
return count
