-- Tables made and dropped by halves: 100,000 a round (each with a string and a nested
-- table), 20 rounds, a step of the collector after each. What the collector then walks
-- lies where the allocator put the blocks made after the last sweep (bench/sweep).
local t = {}
for r = 1, 20 do
  for i = 1, 100000 do t[i] = {i, tostring(i), {x = i}} end
  for i = 1, 100000, 2 do t[i] = nil end
  collectgarbage("step", 0)
end
print(#t)
