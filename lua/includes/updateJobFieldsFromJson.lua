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
