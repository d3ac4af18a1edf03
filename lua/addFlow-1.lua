--[[
  Add a whole flow in one call, so that it is written whole or not at all (docs/protocol.md
  §3.6). First, every check that could refuse one of its nodes runs against the state that
  node's add will meet (the jobs of the nodes before it count as stored), before the first
  write; then each node's add runs, the add scripts' own code, in the order given (each parent
  before its children); last, each parent's release step, as releaseParentIfNoPendingDependencies.
  A Redis that refuses the first write (out of memory) refuses the whole call; once a script
  has written, Redis runs it to its end (it can no longer be killed, and memory limits no
  longer stop it), so no refusal can fall between two nodes.

  Input:
    KEYS[1] meta (of the root's queue: the call belongs to the root's slot)
    ARGV[1] timestamp (ms) of the release steps
    ARGV[2] number of nodes
    ARGV[3..] each node in turn: its add script's name (addParentJob, addStandardJob,
              addDelayedJob, addPrioritizedJob), its key count n, its n KEYS, its argument
              count m, its m ARGV (the add layout of includes/prepareNewJob.lua; every node
              has a custom id, its job_id or a UUID)

  Output:
    {1, id...}      written: each node's id, as its add returned it
    {2, owner}      the root's deduplication id is taken: only the root's add ran (it wrote
                    "deduplicated"; owner is the job that keeps the id)
    {0, code, n}    refused before any write, for node n: -5 its parent does not exist (the
                    root's, given by its options), -7 its custom id is a job that belongs to
                    another parent, which still exists

  Events: those of each node's add, then those of the releases.
]]
-- @include "newJobRefusal"
-- @script "addParentJob"
-- @script "addStandardJob"
-- @script "addDelayedJob"
-- @script "addPrioritizedJob"
-- @script "releaseParentIfNoPendingDependencies"
local adds = {addParentJob = addParentJob, addStandardJob = addStandardJob,
              addDelayedJob = addDelayedJob, addPrioritizedJob = addPrioritizedJob}

local function malformed(what)
  return redis.error_reply("ERR addFlow: " .. what .. " (nothing was written)")
end

local nodes = {}
local nodeCount = tonumber(ARGV[2])
if not nodeCount or nodeCount < 1 then
  return malformed("the node count is not a number >= 1")
end
local at = 3
for n = 1, nodeCount do
  local scriptName = ARGV[at]
  local keyCount = tonumber(ARGV[at + 1])
  if not adds[scriptName] or not keyCount then
    return malformed("node " .. n .. " does not start with an add script's name and a key count")
  end
  local keys = {}
  for k = 1, keyCount do
    keys[k] = ARGV[at + 1 + k]
  end
  at = at + 2 + keyCount
  local argCount = tonumber(ARGV[at])
  if not argCount or at + argCount > #ARGV or argCount < 11 or ARGV[at + 2] == "" then
    return malformed("node " .. n .. " has no add layout with a custom id")
  end
  local args = {}
  for k = 1, argCount do
    args[k] = ARGV[at + k]
  end
  at = at + 1 + argCount
  nodes[n] = {add = adds[scriptName], isParent = scriptName == "addParentJob", keys = keys, args = args}
end
if at ~= #ARGV + 1 then
  return malformed("arguments left after the last node")
end

-- The checks: nothing is written until every node passed.
local stored = {}
local function existsOrStored(key)
  return stored[key] or redis.call("EXISTS", key) == 1
end
for n, node in ipairs(nodes) do
  local keyPrefix, customId, parentKey = node.args[1], node.args[2], node.args[5]
  local refused = newJobRefusal(keyPrefix, customId, parentKey, existsOrStored)
  if refused then
    return {0, refused, n}
  end
  stored[keyPrefix .. customId] = true
end

-- The writes.
local ids = {1}
for n, node in ipairs(nodes) do
  local id = node.add(node.keys, node.args)
  if type(id) ~= "string" then  -- the checks above rule this out
    return redis.error_reply("ERR addFlow: node " .. n .. " was refused (" .. tostring(id) ..
      ") after the checks passed; the nodes before it are written")
  end
  if n == 1 and id ~= node.args[2] then
    return {2, id}
  end
  ids[n + 1] = id
end
for _, node in ipairs(nodes) do
  if node.isParent then
    local keyPrefix, jobId = node.args[1], node.args[2]
    local jobKey = keyPrefix .. jobId
    releaseParentIfNoPendingDependencies({jobKey, jobKey .. ":dependencies"},
      {string.sub(keyPrefix, 1, -2), jobId, ARGV[1]})
  end
end
return ids
