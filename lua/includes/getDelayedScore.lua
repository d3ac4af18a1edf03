--[[
  Score of a delayed job: due * 4096 + seq, seq keeping FIFO order among jobs due in the
  same millisecond. Returns the score and the absolute due time in ms.
]]
-- @include "toIntString"
local function getDelayedScore(delayedKey, timestamp, delay)
  local due = tonumber(timestamp) + tonumber(delay)
  local minScore = due * 0x1000
  local maxScore = minScore + 0xfff
  local last = redis.call("ZREVRANGEBYSCORE", delayedKey, toIntString(maxScore), toIntString(minScore),
    "WITHSCORES", "LIMIT", 0, 1)
  if last[2] then
    local score = tonumber(last[2]) + 1
    if score > maxScore then
      score = maxScore
    end
    return score, due
  end
  return minScore, due
end
