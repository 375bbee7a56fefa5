-- binary trees (GC-heavy), as in the benchmarks game
local function bottomup(d) if d == 0 then return {} end d = d - 1 return {bottomup(d), bottomup(d)} end
local function check(t) if t[1] then return 1 + check(t[1]) + check(t[2]) end return 1 end
local N = 16
local long = bottomup(N)
local total = 0
for d = 4, N, 2 do
  local iters = 2 ^ (N - d + 4)
  for i = 1, iters do total = total + check(bottomup(d)) end
end
print(total, check(long))
