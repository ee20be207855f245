// What the fuzz targets share: a private folder to write the fuzzer's bytes into (for readers
// that take a path, as pitfall's do), and the fixture scenario's description.
#pragma once

#include "model/index.hpp"
#include "pitfall/detail/manifest.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <unistd.h>

namespace pitfall::fuzz {

/// A folder of this process's own, made once.
inline const std::string& scratch() {
    static const std::string dir = [] {
        char templ[] = "/tmp/pitfall-fuzz-XXXXXX";
        const char* made = ::mkdtemp(templ);
        if (made == nullptr)
            std::abort();
        return std::string(made);
    }();
    return dir;
}

/// Writes `data` to `path` (whole, replacing it).
inline void write_bytes(const std::string& path, const std::uint8_t* data, std::size_t size) {
    FILE* f = std::fopen(path.c_str(), "wb");
    if (f == nullptr)
        std::abort();
    if (size > 0 && std::fwrite(data, 1, size, f) != size)
        std::abort();
    std::fclose(f);
}

inline std::string_view text_of(const std::uint8_t* data, std::size_t size) {
    return {reinterpret_cast<const char*>(data), size};
}

/// A scenario like the fixture's: two backends, variants ok and oom, a ratio, parameters.
inline const char* fixture_manifest_text = R"({
  "name": "fz", "summary": "s", "failure_class": "numeric", "backends": ["cpu", "cuda"],
  "params": {"n": {"default": 8, "min": 1, "max": 64}, "mode": {"default": "a", "choices": ["a", "b"]}},
  "variants": [{"name": "ok", "kind": "reproduce"}, {"name": "oom", "kind": "remedy"}],
  "ratios": [{"name": "speedup", "numerator": "ok", "denominator": "oom", "samples": "step"}]
})";

inline const runner::scenario_entry& fixture_scenario() {
    static const runner::scenario_entry entry = [] {
        runner::scenario_entry e;
        e.program = "/nonexistent/fz";
        e.manifest_path = "fz/scenario.json";
        auto m = parse_manifest(fixture_manifest_text, e.manifest_path);
        if (!m.is_ok())
            std::abort();
        e.description = std::move(m).value();
        return e;
    }();
    return entry;
}

} // namespace pitfall::fuzz
