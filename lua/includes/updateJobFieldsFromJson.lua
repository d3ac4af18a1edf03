--[[
  HSET the fields a worker sends with a transition (failedReason, stacktrace ...), given as a
  JSON array [field, value, field, value ...]; an empty string means none.
]]
local function updateJobFieldsFromJson(jobKey, fieldsJson)
  if fieldsJson and fieldsJson ~= "" then
    local fields = cjson.decode(fieldsJson)
    if #fields > 0 then
      redis.call("HSET", jobKey, unpack(fields))
    end
  end
end

-- The value such an array gives `name` (its last one), or nil: for a script that must know a
-- field the worker sends before it writes it (moveToFinished's "atm" repair).
local function fieldFromJson(fieldsJson, name)
  local value = nil
  if fieldsJson and fieldsJson ~= "" then
    local fields = cjson.decode(fieldsJson)
    for i = 1, #fields - 1, 2 do
      if fields[i] == name then
        value = fields[i + 1]
      end
    end
  end
  return value
end
