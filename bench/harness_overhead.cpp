// What the harness costs: the fixture's small cases (one sample each) started directly, against
// the same cases through `pitfall run` (index and baselines read, environment probe or its kept
// answer, containment, process group and cgroup, timeout watch, result judged and appended to
// results.jsonl, summary and reports).
//
//   BM_case_direct / BM_case_through_harness: one case, as CTest runs each test (the probe's
//     answer kept from the previous iteration, as in a ctest run); their difference is the cost
//     of one `pitfall run` of one case.
//   BM_overhead: in each iteration one case and five cases, each directly and through one
//     `pitfall run`; counters per_case_ms (what each further case of a run costs beyond its
//     own process: (harness 5 - harness 1 - (direct 5 - direct 1)) / 4) and per_run_ms (what a
//     run costs once: harness 1 - direct 1 - per_case_ms), measured in the same iterations so
//     that the machine's load moves both sides alike.
#include "pitfall/detail/process.hpp"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <string>
#include <unistd.h>
#include <vector>

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

const std::vector<std::string> five = {"ok", "unsupported", "oom", "exit3", "bad_check"};

/// Seconds to run `variants` one after another, each directly.
double direct_seconds(const std::vector<std::string>& variants) {
    const auto start = std::chrono::steady_clock::now();
    for (const auto& v : variants) {
        process_request req;
        req.argv = {PITFALL_BENCH_FIXTURE,      "--backend", "cpu",      "--variant", v, "--out",
                    scratch() + "/direct.json", "--param",   "samples=1"};
        (void)run_process(req); // some of them fail on purpose (exit3, bad_check)
    }
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

/// Seconds of one `pitfall run` of `variants`.
double harness_seconds(const std::vector<std::string>& variants) {
    std::string list;
    for (const auto& v : variants)
        list += (list.empty() ? "" : ",") + v;
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
                list,
                "--samples",
                "1",
                "--out",
                scratch() + "/runs",
                "--replace"};
    const auto start = std::chrono::steady_clock::now();
    (void)run_process(req);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double median_of(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
}

void BM_overhead(benchmark::State& state) {
    std::vector<double> per_case, per_run;
    for (auto _ : state) {
        const double d1 = direct_seconds({five[0]});
        const double h1 = harness_seconds({five[0]});
        const double d5 = direct_seconds(five);
        const double h5 = harness_seconds(five);
        const double case_cost = (h5 - h1 - (d5 - d1)) / 4;
        per_case.push_back(case_cost);
        per_run.push_back(h1 - d1 - case_cost);
    }
    // Medians over the iterations: one disturbed iteration moves a mean by tens of ms.
    state.counters["per_case_ms"] = 1e3 * median_of(per_case);
    state.counters["per_run_ms"] = 1e3 * median_of(per_run);
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
BENCHMARK(BM_overhead)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(15);
BENCHMARK_MAIN();
