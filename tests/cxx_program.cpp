// A C++ workload for the real-program test: containers and strings through operator new and
// delete (which reach malloc and free), printing a checksum that must not depend on the
// allocator.
#include <cstdint>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

int main() {
    std::uint64_t sum = 0;
    std::map<std::string, std::vector<int>> m;
    for (int round = 0; round < 20; round++) {
        for (int i = 0; i < 5000; i++) {
            std::string key = "key-" + std::to_string((i * 7919) % 3000) + std::string(i % 40, 'x');
            auto &v = m[key];
            v.push_back(i + round);
            if (v.size() > 8) v.erase(v.begin(), v.begin() + 4);
        }
        std::unordered_map<int, std::unique_ptr<std::string>> u;
        for (int i = 0; i < 20000; i++) u[i] = std::make_unique<std::string>(i % 300, 'a' + i % 26);
        for (auto &kv : u) sum += kv.second->size();
        if (round % 3 == 0) m.clear();
    }
    for (auto &kv : m) {
        sum += kv.first.size();
        for (int x : kv.second) sum += static_cast<std::uint64_t>(x);
    }
    std::vector<std::vector<double>> grid(300, std::vector<double>(300, 1.5));
    for (auto &row : grid) row.resize(row.size() * 3, 2.5);
    for (auto &row : grid) for (double d : row) sum += static_cast<std::uint64_t>(d);
    std::cout << "checksum " << sum << " entries " << m.size() << "\n";
    return 0;
}
