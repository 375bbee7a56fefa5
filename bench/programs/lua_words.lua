-- string building and a word count over generated text
local words = {}
for i = 1, 300000 do words[#words + 1] = "w" .. (i * 7919 % 5000) end
local text = table.concat(words, " ")
local count = {}
for w in text:gmatch("%S+") do count[w] = (count[w] or 0) + 1 end
local keys = {}
for k in pairs(count) do keys[#keys + 1] = k end
table.sort(keys, function(a, b) return count[a] > count[b] or (count[a] == count[b] and a < b) end)
print(#keys, keys[1])
