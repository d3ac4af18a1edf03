--[[
  Decode an argument that lists new scheduler iterations (docs/protocol.md §4.6): a JSON array
  of {"at": slot ms, "opts": iteration opts}. "" (or nil) is the empty list. Returns the list,
  or nil and what is wrong, for the caller's error reply before its first write.
]]
-- @include "isJobSchedulerMillis"
local function decodePlacements(value)
  if value == nil or value == "" then
    return {}
  end
  local list = cjson.decode(value)
  if type(list) ~= "table" then
    return nil, "must be a JSON array"
  end
  for _, item in ipairs(list) do
    if type(item) ~= "table" or not isJobSchedulerMillis(item["at"]) or type(item["opts"]) ~= "table" then
      return nil, "items must be {at: whole ms, opts: object}"
    end
  end
  return list
end
