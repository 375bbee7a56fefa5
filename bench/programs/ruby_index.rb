# An index of 200,000 words rebuilt 3 times: strings made, sliced and joined, a hash of
# arrays filled, its keys sorted. Ruby asks malloc_usable_size of every block it allocates
# and frees (its count of malloc'd bytes for the collector).
srand(1)
words = Array.new(200_000) { |i| "w#{i}" * (1 + rand(6)) }
3.times do
  idx = Hash.new { |h, k| h[k] = [] }
  words.each_with_index { |w, i| idx[w[0, 3]] << i; idx[w] << w.upcase }
  line = idx.keys.sort.map { |k| "#{k}:#{idx[k].size}" }.join(",")
  raise "empty index" if line.empty?
  words.shuffle!
  words.map! { |w| rand < 0.3 ? w.reverse + "x" : w }
end
puts words.size
