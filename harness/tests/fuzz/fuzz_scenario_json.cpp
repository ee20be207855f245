// scenario.json: parse_manifest on the fuzzer's bytes, then every parameter's default held to
// its own bounds (what a scenario program does with --param values).
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    auto m = pitfall::parse_manifest(pitfall::fuzz::text_of(data, size), "scenario.json");
    if (!m.is_ok())
        return 0;
    for (const auto& p : m.value().params) {
        (void)pitfall::check_param_value(p, p.default_value);
        (void)pitfall::check_param_value(p, nlohmann::json("text"));
    }
    for (const auto& v : m.value().variants)
        (void)m.value().backends_of(v);
    return 0;
}
