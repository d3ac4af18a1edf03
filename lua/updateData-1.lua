--[[
  Replace a job's data (the JSON was encoded and bounded by the client).

  Input:
    KEYS[1] job
    ARGV[1] the data JSON

  Output:
    0   stored
    -1  the job does not exist

  Events: none.
]]
if redis.call("EXISTS", KEYS[1]) == 0 then
  return -1
end
redis.call("HSET", KEYS[1], "data", ARGV[1])
return 0
