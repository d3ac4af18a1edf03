--[[
  The `every` arithmetic of a job scheduler (docs/protocol.md §4.2). Returns the millis of
  the next slot and the schedule's phase (the offset within the period), both as integers.
    prevMillis nil (a fresh schedule): startDate when given (but never before now); else,
      with a phase > 0, the first slot of that phase after now; else now itself.
    prevMillis set (continuing): prevMillis + every; when that is already past, the slot
      of the same phase that comes first after now, so missed runs are skipped, not piled up.
  The phase is kept when one was given (> 0), else it is the phase of the slot just computed.
]]
local function getJobSchedulerEveryNextMillis(prevMillis, every, now, offset, startDate)
  local phase = tonumber(offset) or 0
  local nextMillis
  if prevMillis == nil then
    if startDate then
      nextMillis = math.max(tonumber(startDate), now)
    elseif phase > 0 then
      nextMillis = math.floor(now / every) * every + phase
      if nextMillis <= now then
        nextMillis = nextMillis + every
      end
    else
      nextMillis = now
    end
  else
    nextMillis = prevMillis + every
    if nextMillis < now then
      nextMillis = math.floor(now / every) * every + phase
      if nextMillis <= now then
        nextMillis = nextMillis + every
      end
    end
  end
  if phase == 0 then
    phase = nextMillis - math.floor(nextMillis / every) * every
  end
  return math.floor(nextMillis), math.floor(phase)
end
