--[[
  A full job key "<prefix>:{<queue>}:<jobId>" as its key prefix ("<prefix>:{<queue>}:") and
  job id. The queue's hash tag ends at the first "}:" (queue names cannot hold braces), and
  the id after it may itself contain ":" (scheduler iterations do).
]]
local function splitJobKey(jobKey)
  local tagEnd = string.find(jobKey, "}:", 1, true)
  if not tagEnd then
    local lastColon = string.match(jobKey, ".*():")
    return string.sub(jobKey, 1, lastColon), string.sub(jobKey, lastColon + 1)
  end
  return string.sub(jobKey, 1, tagEnd + 1), string.sub(jobKey, tagEnd + 2)
end
