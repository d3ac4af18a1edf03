--[[
  (Re)write a scheduler's record: ZADD it to the repeat set at the millis of its pending
  iteration, then replace its hash, so options left out of this upsert disappear. Only the
  iteration count `ic` survives a rewrite (it starts at 1). Fields, in BullMQ 6.7's order and
  each only when it has a value: name, tz, limit, pattern, startDate, endDate, every, offset,
  opts (when not "{}"), data (when not "{}"), ic; then EchoMQ's own emqMisfire and
  emqMisfireGraceMs when the upsert gave a missed-run policy (§4.6).
  opts is the scheduler's options table (cjson-decoded), offset the phase to store (or nil).
]]
-- @include "toIntString"
local function storeJobScheduler(repeatKey, schedulerKey, schedulerId, nextMillis, opts, offset,
                                 templateOpts, templateData)
  redis.call("ZADD", repeatKey, toIntString(nextMillis), schedulerId)
  local fields = {"name", opts["name"]}
  local function add(field, value)
    if value ~= nil then
      fields[#fields + 1] = field
      fields[#fields + 1] = value
    end
  end
  add("tz", opts["tz"])
  if opts["limit"] then add("limit", toIntString(opts["limit"])) end
  add("pattern", opts["pattern"])
  if opts["startDate"] then add("startDate", toIntString(opts["startDate"])) end
  if opts["endDate"] then add("endDate", toIntString(opts["endDate"])) end
  if opts["every"] then add("every", toIntString(opts["every"])) end
  if offset then add("offset", toIntString(offset)) end
  if templateOpts ~= "" and templateOpts ~= "{}" then add("opts", templateOpts) end
  if templateData ~= "" and templateData ~= "{}" then add("data", templateData) end
  add("ic", redis.call("HGET", schedulerKey, "ic") or "1")
  add("emqMisfire", opts["emqMisfire"])
  if opts["emqMisfireGraceMs"] then add("emqMisfireGraceMs", toIntString(opts["emqMisfireGraceMs"])) end
  redis.call("DEL", schedulerKey)
  redis.call("HSET", schedulerKey, unpack(fields))
end
