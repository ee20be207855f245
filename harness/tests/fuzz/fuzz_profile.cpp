// An expected/<profile>/profile.json: load_profiles on a folder holding it, then the profile
// chosen for a few fingerprint summaries (the match rules read every value it holds).
#include "fuzz_common.hpp"
#include "judge/baseline.hpp"

#include <filesystem>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace pitfall;
    using nlohmann::json;
    static const std::string expected = [] {
        const std::string d = fuzz::scratch() + "/expected";
        std::filesystem::create_directories(d + "/p");
        return d;
    }();
    static const runner::scenario_index index = [] {
        runner::scenario_index i;
        i.scenarios.push_back(fuzz::fixture_scenario());
        return i;
    }();
    fuzz::write_bytes(expected + "/p/profile.json", data, size);
    auto profiles = runner::load_profiles(expected, index);
    if (!profiles.is_ok())
        return 0;
    for (const json& summary :
         {json{{"gpu_count", 0}, {"host_only", true}, {"os", "Debian"}},
          json{{"gpu_count", 1}, {"cuda_runtime_version", 12040}, {"device_name", "H100"}},
          json::object()}) {
        auto choice = runner::choose_profile(profiles.value(), summary, "");
        if (choice.is_ok())
            (void)choice.value().entry_for("fz", "cpu.ok");
    }
    return 0;
}
