// What the harness costs per case: the fixture's trivial case (`ok`, one sample) started
// directly, against the same case through `pitfall run` (index and baselines read, environment
// probe, process group, timeout watch, result judged and appended to results.jsonl, summary).
// The difference of the two medians is the harness's overhead for a run of one case.
#include "pitfall/detail/process.hpp"

#include <benchmark/benchmark.h>

#include <filesystem>
#include <string>
#include <unistd.h>

namespace {
using pitfall::process_request;
using pitfall::run_process;

std::string scratch() {
    static const std::string dir = [] {
        std::string d = std::filesystem::temp_directory_path().string() + "/pitfall-bench-" +
                        std::to_string(::getpid());
        std::filesystem::create_directories(d + "/expected/any");
        FILE* f = std::fopen((d + "/expected/any/profile.json").c_str(), "w");
        std::fputs(R"({"schema": "pitfall.profile/1", "name": "any", "match": {}})", f);
        std::fclose(f);
        return d;
    }();
    return dir;
}

void run_or_fail(benchmark::State& state, const process_request& req) {
    const auto out = run_process(req);
    if (!out.started || out.exit_code.value_or(-1) != 0)
        state.SkipWithError(("case did not exit 0: " + out.start_error).c_str());
}

void BM_case_direct(benchmark::State& state) {
    process_request req;
    req.argv = {PITFALL_BENCH_FIXTURE,      "--backend", "cpu",      "--variant", "ok", "--out",
                scratch() + "/direct.json", "--param",   "samples=1"};
    for (auto _ : state)
        run_or_fail(state, req);
}

void BM_case_through_harness(benchmark::State& state) {
    process_request req;
    req.argv = {PITFALL_BENCH_PITFALL,
                "run",
                "--index",
                PITFALL_BENCH_FIXTURE_INDEX,
                "--expected",
                scratch() + "/expected",
                "--backend",
                "cpu",
                "--variant",
                "ok",
                "--samples",
                "1",
                "--out",
                scratch() + "/run",
                "--replace"};
    for (auto _ : state)
        run_or_fail(state, req);
}
} // namespace

BENCHMARK(BM_case_direct)->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime()->UseRealTime();
BENCHMARK(BM_case_through_harness)
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()
    ->UseRealTime();
BENCHMARK_MAIN();
