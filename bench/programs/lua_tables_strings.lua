-- lua_tables.lua, then 200,000 strings of up to 200 bytes kept in a growing table.
dofile((arg[0]:match("^(.*/)") or "") .. "lua_tables.lua")
local s = {}
for i = 1, 200000 do s[#s + 1] = string.rep("x", i % 200) end
print(#s)
