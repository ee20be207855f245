// An expected/<profile>/<scenario>.json baseline: the schema and the checks after it, then,
// when it is accepted, every entry used to judge a fixed observation (where a wrong type
// would throw).
#include "fuzz_common.hpp"
#include "judge/baseline.hpp"
#include "pitfall/detail/json_file.hpp"

namespace {
using nlohmann::json;

const json& observed_result() {
    static const json r = {
        {"outcome", {{"status", "ok"}}},
        {"ran_on", "cpu: fuzz"},
        {"checks", json::array({{{"name", "c"}, {"passed", true}, {"detail", ""}}})},
        {"measurements", {{"loss", {{"value", 0.5}, {"unit", ""}}}}},
        {"samples", {{"step", {{"unit", "s"}, {"values", {0.1, 0.2, 0.3}}}}}},
        {"memory", {{"tracked_peak_bytes", 1000}}},
        {"events", {{"oom", {{"status", "error"}, {"error", "cudaErrorMemoryAllocation"}}}}}};
    return r;
}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace pitfall;
    auto doc = detail::parse_json(fuzz::text_of(data, size), "fz.json");
    if (!doc.is_ok())
        return 0;
    if (!runner::validate_expected("fz.json", doc.value(), fuzz::fixture_scenario()).is_ok())
        return 0;
    runner::judge_context context;
    context.fingerprint_id = "0123456789abcdef";
    for (const auto& [key, entry] : doc.value()["cases"].items()) {
        const std::string backend = key.substr(0, key.find('.'));
        for (const json& outcome :
             {observed_result()["outcome"], json{{"status", "signal"}, {"signal", "SIGSEGV"}},
              json{{"status", "exit"}, {"exit_code", 3}}}) {
            const runner::observation seen{outcome, observed_result(), 123456, 1};
            (void)runner::judge(seen, entry, backend, context);
        }
    }
    return 0;
}
