--[[
  Why an add must be refused before it writes anything, or nil (the add layout of
  includes/prepareNewJob.lua):
    -5  it names a parent (parentKey) that does not exist;
    -7  its custom id is an existing job that belongs to another parent, one that still exists.
  exists(key) says whether a key exists: keyExists for one add; a flow passes one that also
  counts the jobs its earlier nodes will have stored (lua/addFlow-1.lua).
]]
local function keyExists(key)
  return redis.call("EXISTS", key) == 1
end

local function newJobRefusal(keyPrefix, customId, parentKey, exists)
  if parentKey == "" then
    return nil
  end
  if not exists(parentKey) then
    return -5
  end
  if customId ~= "" then
    local existingParent = redis.call("HGET", keyPrefix .. customId, "parentKey")
    if existingParent and existingParent ~= parentKey and exists(existingParent) then
      return -7
    end
  end
  return nil
end
