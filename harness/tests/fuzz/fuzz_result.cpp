// A case's result file: read by the runner's own reader (read_result_file: the safe reader, then
// result.schema.json), then, when accepted, judged against a baseline entry that reads every
// part of it (outcome, events, checks, measurements, memory, timings).
#include "fuzz_common.hpp"
#include "judge/baseline.hpp"
#include "pitfall/detail/result_file.hpp"

namespace {
using nlohmann::json;

const json& entry() {
    static const json e = {
        {"outcome", {{"status", "ok"}}},
        {"events", {{"oom", {{"status", "error"}, {"error", "cudaErrorMemoryAllocation"}}}}},
        {"measurements",
         {{"loss", {{"min", 0}, {"max", 1}}}, {"err", {{"value", 1}, {"rel_tol", 0.1}}}}},
        {"memory",
         {{"tracked_peak_bytes", {{"equals", 1000}}}, {"peak_rss_bytes", {{"max", 1e9}}}}},
        {"timings", {{"step", {{"unit", "s"}, {"samples", {0.1, 0.2, 0.3, 0.2, 0.1}}}}}},
        {"ran_on", "cpu"},
        {"records", {{"checks", {"c", "d"}}, {"measurements", {"loss"}}, {"samples", {"step"}}}},
        {"provenance",
         {{"kind", "observed"},
          {"date", "2026-01-01"},
          {"fingerprint", "f"},
          {"fingerprint_id", "0123456789abcdef"}}}};
    return e;
}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace pitfall;
    const std::string path = fuzz::scratch() + "/result.json";
    fuzz::write_bytes(path, data, size);
    auto doc = read_result_file(path);
    if (!doc.is_ok())
        return 0;
    runner::judge_context context;
    context.fingerprint_id = "0123456789abcdef";
    const runner::observation seen{doc.value()["outcome"], doc.value(), 5e8, 1};
    for (const char* backend : {"cpu", "cuda"}) {
        (void)runner::judge(seen, entry(), backend, context);
        (void)runner::judge(seen, json(), backend, context);
    }
    return 0;
}
