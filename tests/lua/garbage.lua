-- A garbage-heavy Lua workload for tests/servers.sh: it is run with and without hakmem and
-- both runs must print the same lines. Lua allocates everything through realloc and free
-- (tables, strings, closures, coroutines and their growing arrays), so this drives an
-- allocator hard. Everything printed is deterministic: no addresses, no time, and no sums
-- that depend on the order of a hash table's traversal (Lua seeds its string hash at random).

local fmt = string.format
local results = {}
local function report(name, ...)
  local parts = { name }
  for i = 1, select("#", ...) do parts[#parts + 1] = tostring((select(i, ...))) end
  results[#results + 1] = table.concat(parts, " ")
  print(results[#results])
end

local function check(cond, what)
  if not cond then error("check failed: " .. what, 2) end
end

-- A small linear congruential generator, so that the numbers do not depend on Lua's own.
local seed = 12345
local function rand(n)
  seed = (seed * 1103515245 + 12345) % 2147483648
  return seed % n
end

-- A checksum over a string that looks at every byte, 64 bytes at a time.
local function strsum(s, acc)
  acc = acc or 0
  for i = 1, #s, 64 do
    local a, b, c, d = s:byte(i, i + 3)
    acc = (acc * 31 + a + (b or 0) * 3 + (c or 0) * 5 + (d or 0) * 7 + #s) % 1000000007
  end
  return acc
end

collectgarbage("collect")
local base_kb = collectgarbage("count")

-- 1. Tables of tables: binary trees built and dropped, one long-lived tree kept throughout.
local function tree(depth)
  if depth == 0 then return { } end
  depth = depth - 1
  return { tree(depth), tree(depth) }
end
local function nodes(t)
  if t[1] == nil then return 1 end
  return 1 + nodes(t[1]) + nodes(t[2])
end
local longlived = tree(14)
local total = 0
for depth = 4, 14, 2 do
  local iterations = 2 ^ (14 - depth + 2)
  local sum = 0
  for _ = 1, iterations do sum = sum + nodes(tree(depth)) end
  total = total + sum
end
check(nodes(longlived) == 2 ^ 15 - 1, "long-lived tree")
report("trees", total, nodes(longlived))

-- 2. Records: a few million short-lived tables and strings, a small fraction kept.
local kept, acc = {}, 0
for i = 1, 1500000 do
  local r = { id = i, name = "rec" .. i, tags = { i % 7, i % 11 } }
  acc = (acc + r.id * #r.name + r.tags[1] + r.tags[2]) % 1000000007
  if i % 1000 == 0 then kept[#kept + 1] = r end
end
check(#kept == 1500, "kept records")
check(kept[1500].name == "rec1500000", "last kept record")
report("records", acc, #kept)

-- 3. Strings: concatenation in a loop (every step a new string), table.concat, formats,
-- gsub and rep; sizes from a few bytes to several hundred KiB.
local s = ""
for i = 1, 4000 do s = s .. fmt("%d,", i * 7 % 1000) end
local pieces = {}
for i = 1, 50000 do pieces[i] = fmt("%05d:%s", i, string.rep(string.char(97 + i % 26), i % 17)) end
local joined = table.concat(pieces, "|")
local upper = joined:upper()
local swapped, nswaps = joined:gsub("(%d+):(%a*)", "%2=%1")
local words = 0
for _ in joined:gmatch("[^|]+") do words = words + 1 end
check(words == 50000 and nswaps == 50000, "string pieces")
local big = {}
for i = 1, 40 do big[i] = string.rep("x" .. i, 1000 + rand(60000)) end
local bigsum = 0
for i = 1, 40 do bigsum = strsum(big[i], bigsum) end
report("strings", #s, strsum(s), #joined, strsum(joined), strsum(upper), strsum(swapped), bigsum)
pieces, joined, upper, swapped, big = nil, nil, nil, nil, nil

-- 4. Closures: counters sharing upvalues, chains of closures over closures.
local function counter(start)
  local n = start
  return function(k) n = n + k; return n end
end
local closure_sum = 0
for round = 1, 200 do
  local fs = {}
  for i = 1, 1000 do fs[i] = counter(i * round) end
  for i = 1, 1000 do closure_sum = (closure_sum + fs[i](i) + fs[i](1)) % 1000000007 end
end
local function compose(f, g) return function(x) return f(g(x)) end end
local chain = function(x) return x end
for i = 1, 2000 do
  local k = i % 5
  chain = compose(function(x) return (x + k) % 1000003 end, chain)
end
report("closures", closure_sum, chain(1), chain(999))
chain = nil

-- 5. Arrays that grow and shrink (realloc of the array part), hash parts that rehash.
local grow = {}
for round = 1, 30 do
  for i = 1, 20000 do grow[#grow + 1] = i * round end
  for _ = 1, 15000 do grow[#grow] = nil end
end
local h = {}
for i = 1, 200000 do h["k" .. (i % 50000)] = i end
local hsum, hcount = 0, 0
for _, v in pairs(h) do hsum = hsum + v; hcount = hcount + 1 end
report("arrays", #grow, grow[#grow], hcount, hsum)
grow, h = nil, nil

-- 6. Coroutines: each one has its own stack, created and dropped by the thousand.
local co_sum = 0
for i = 1, 20000 do
  local co = coroutine.wrap(function(a)
    local b = coroutine.yield(a + 1)
    local t = { a, b, tostring(a * b) }
    return #t[3] + t[1] + t[2]
  end)
  co_sum = co_sum + co(i) + co(i % 13)
end
report("coroutines", co_sum)

-- 7. Weak tables and finalizers: the collector must clear and finalize what is unreachable.
local weak = setmetatable({}, { __mode = "k" })
local finalized = 0
local strong = {}
for i = 1, 20000 do
  local key = { i }
  weak[key] = string.rep("w", i % 100)
  if i % 4 == 0 then strong[#strong + 1] = key end
  setmetatable({}, { __gc = function() finalized = finalized + 1 end })
end
collectgarbage("collect")
collectgarbage("collect")
local alive = 0
for _ in pairs(weak) do alive = alive + 1 end
check(alive == 5000, "weak table kept " .. alive .. " keys")
check(finalized == 20000, "finalizers ran " .. finalized .. " times")
report("weak", alive, finalized)
strong = nil

-- 8. The same churn in generational mode, then back to incremental with explicit steps.
collectgarbage("generational")
local gen_acc = 0
for i = 1, 300000 do
  local t = { i, tostring(i), { i } }
  gen_acc = (gen_acc + #t[2] + t[3][1]) % 1000000007
end
collectgarbage("incremental")
for i = 1, 100000 do
  local t = { tostring(i) .. "!" }
  gen_acc = (gen_acc + #t[1]) % 1000000007
  if i % 10000 == 0 then collectgarbage("step", 0) end
end
report("modes", gen_acc)

-- The memory that everything above used must be returned to Lua's count once collected.
collectgarbage("collect")
local peak_dropped_kb = collectgarbage("count")
kept, longlived = nil, nil
collectgarbage("collect")
local end_kb = collectgarbage("count")
check(end_kb < peak_dropped_kb, "memory after dropping the kept data")
check(end_kb < base_kb + 2048, fmt("memory at the end: %.0f KiB, at the start %.0f KiB", end_kb, base_kb))
report("collected", "ok")
print("summary " .. strsum(table.concat(results, "\n")))
