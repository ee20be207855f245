// What scrubbing a bundle's file costs: scrub_text (values in every form, NAME=value, and the
// known shapes of bundle/secret_shapes.hpp) over a log of the given size with a secret of each
// kind planted every 4 KiB, so hits are dense. The bundle copies files up to 512 MiB: that size
// must scrub in under 30 s on a machine of the project's kind (docs/bundle.md).
//
//   build/default/bench/pitfall_bench_bundle_scrub                   # 16 MiB and 512 MiB
//   build/default/bench/pitfall_bench_bundle_scrub --benchmark_filter=/16
#include "bundle/redact.hpp"

#include <benchmark/benchmark.h>

#include <string>
#include <vector>

namespace {

const char* const secret = "s3cr3t-value-of-a-token-42";

/// `bytes` of log: ordinary lines, and every 4 KiB one holding a secret of one kind in turn.
std::string log_text(std::size_t bytes) {
    const std::vector<std::string> planted = {
        std::string("token in output: ") + secret,
        std::string("json: \"s3cr3t-value-of-a-token-42\""),
        "fetch https://alice:hunter2hunter2@pypi.example.com/simple",
        "Authorization: Bearer abcdefghijklmnopqrstuvwxyz",
        "clone with ghp_abcdefghijklmnopqrstuvwxyz0123456789",
        "hf_abcdefghijklmnopqrstuvwxyz0123 AKIAABCDEFGHIJKLMNOP",
        "MY_API_TOKEN=whatever-it-holds",
    };
    const std::string ordinary =
        "step 1234: loss 0.12345 lr 0.001 grad-norm 1.2345 (cpu.float64_inputs.reproduce)\n";
    std::string out;
    out.reserve(bytes + 4096);
    std::size_t k = 0;
    while (out.size() < bytes) {
        for (std::size_t filled = 0; filled < 4096; filled += ordinary.size())
            out += ordinary;
        out += planted[k++ % planted.size()];
        out += '\n';
    }
    out.resize(bytes);
    return out;
}

void BM_scrub(benchmark::State& state) {
    const auto bytes = static_cast<std::size_t>(state.range(0)) << 20;
    const std::string text = log_text(bytes);
    const std::vector<std::string> values =
        pitfall::runner::secret_values({std::string("MY_API_TOKEN=") + secret});
    for (auto _ : state) {
        std::string scrubbed = pitfall::runner::scrub_text(text, values);
        benchmark::DoNotOptimize(scrubbed.data());
        if (scrubbed.find(secret) != std::string::npos)
            state.SkipWithError("a secret survived the scrub");
    }
    state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                            static_cast<std::int64_t>(bytes));
    state.counters["MiB"] = static_cast<double>(state.range(0));
}
BENCHMARK(BM_scrub)->Arg(16)->Arg(512)->Unit(benchmark::kSecond)->Iterations(1);

} // namespace

BENCHMARK_MAIN();
