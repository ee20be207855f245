// Timing verdicts across hosts: normalising, the run's multiple-testing correction, the host
// identity and disturbance-marked series (timing.hpp, stats.hpp, host_identity.hpp,
// pitfall/controls.hpp).
#include "fingerprint/host_identity.hpp"
#include "judge/stats.hpp"
#include "judge/timing.hpp"
#include "pitfall/controls.hpp"
#include "pitfall/scenario.hpp"

#include <gtest/gtest.h>

#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {
using namespace pitfall;
using namespace pitfall::runner;
using nlohmann::json;

/// n samples around `center`, spread +-1% (a quiet machine), from a fixed seed.
std::vector<double> around(double center, int n, unsigned seed) {
    std::mt19937 gen(seed);
    std::uniform_real_distribution<double> jitter(-0.01, 0.01);
    std::vector<double> v;
    v.reserve(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i)
        v.push_back(center * (1 + jitter(gen)));
    return v;
}

/// A result series: its samples and its control's samples, as the SDK writes them.
json series(const std::vector<double>& values, const std::vector<double>& control,
            const json& disturbance = json()) {
    json s = {{"unit", "s"}, {"values", values}, {"controls", {{"host_blas", control}}}};
    if (!disturbance.is_null())
        s["disturbance"] = disturbance;
    return s;
}

/// A baseline entry blessed on host "aaaaaaaaaaaaaaaa" from a process whose control took 1 ms
/// and whose series took 10 ms.
json entry() {
    std::vector<double> normalised;
    for (double x : around(10.0, 27, 7))
        normalised.push_back(x);
    return {{"outcome", {{"status", "ok"}}},
            {"timings",
             {{"step_seconds",
               {{"unit", "s"},
                {"samples", around(0.010, 9, 1)},
                {"normalised",
                 {{"by", "host_blas"}, {"samples", normalised}, {"control_median", 0.001}}}}}}},
            {"provenance",
             {{"kind", "observed"},
              {"fingerprint_id", "00000000000000f1"},
              {"host_id", "aaaaaaaaaaaaaaaa"},
              {"build_type", "Release"}}}};
}

judge_context on_host(const std::string& host) {
    judge_context c;
    c.fingerprint_id = "00000000000000f1";
    c.host_id = host;
    c.build_type = "Release";
    return c;
}

verdict judged(const json& result_series, const judge_context& c) {
    verdict v{verdict_kind::pass, "as expected"};
    judge_timings(entry(), {{"samples", {{"step_seconds", result_series}}}}, std::nullopt, c, v);
    return v;
}

TEST(Timing, NormaliseDividesByTheControlsMedian) {
    std::string why;
    const auto n = normalise(series({2.0, 4.0, 6.0}, {0.5, 2.0, 1.0}), "host_blas", why);
    ASSERT_TRUE(n) << why;
    EXPECT_DOUBLE_EQ(n->control_median, 1.0);
    EXPECT_EQ(n->samples, (std::vector<double>{2.0, 4.0, 6.0}));
    const auto halved = normalise(series({2.0}, {2.0, 2.0, 2.0}), "host_blas", why);
    ASSERT_TRUE(halved);
    EXPECT_DOUBLE_EQ(halved->samples[0], 1.0);
}

// A series whose blessed processes lay 40% apart is judged with at least that tolerance: 1.3x
// on another host is within what unchanged code did between processes, not a regression.
TEST(Timing, NormaliseTakesTheCpuWaitOutOfTheSeriesAndItsControl) {
    std::string why;
    json s = series({2.0, 4.0, 6.0}, {1.0, 2.0, 1.0});
    s["cpu_wait_share"] = {0.5, 0.0, 0.5};
    // Without the control's shares the two would be divided as timed: both, or neither.
    const auto raw = normalise(s, "host_blas", why);
    ASSERT_TRUE(raw) << why;
    EXPECT_EQ(raw->samples, (std::vector<double>{2.0, 4.0, 6.0}));
    EXPECT_FALSE(raw->cpu_wait_share);
    s["control_cpu_wait_share"] = {{"host_blas", {0.5, 0.5, 0.0}}};
    const auto n = normalise(s, "host_blas", why);
    ASSERT_TRUE(n) << why;
    EXPECT_DOUBLE_EQ(n->control_median, 1.0); // {0.5, 1.0, 1.0}
    EXPECT_EQ(n->samples, (std::vector<double>{1.0, 4.0, 3.0}));
    ASSERT_TRUE(n->cpu_wait_share);
    EXPECT_DOUBLE_EQ(*n->cpu_wait_share, 0.5);
    // Shares that are not one in [0, 1] a sample are no correction, never a crash.
    for (const json& bad : {json{0.5, 0.0}, json{0.5, 0.0, 1.5}, json{0.5, 0.0, -0.1},
                            json{"0.5", 0.0, 0.5}, json("x"), json(nullptr)}) {
        json b = s;
        b["cpu_wait_share"] = bad;
        const auto out = normalise(b, "host_blas", why);
        ASSERT_TRUE(out) << bad.dump();
        EXPECT_FALSE(out->cpu_wait_share) << bad.dump();
        EXPECT_EQ(out->samples, (std::vector<double>{2.0, 4.0, 6.0})) << bad.dump();
    }
}

// A CPU quota that holds the process back for a quarter of its time, on the blessing host and
// on another: the wall times are a third longer, the series' and the control's alike, and each
// sample says a quarter of it was waiting for a CPU.
TEST(Timing, AQuotasWaitIsTakenOutOfTheTwinAndDisturbsTheAbsoluteSeries) {
    auto throttled = [](double series_seconds, unsigned seed) {
        json s = series(around(series_seconds / 0.75, 9, seed), around(0.001 / 0.75, 9, seed + 1));
        s["cpu_wait_share"] = std::vector<double>(9, 0.25);
        s["control_cpu_wait_share"] = {{"host_blas", std::vector<double>(9, 0.25)}};
        return s;
    };
    for (const char* host : {"aaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbb"}) {
        const verdict v = judged(throttled(0.010, 40), on_host(host));
        const json& twin = v.timings["step_seconds/host_blas"];
        EXPECT_EQ(twin["verdict"], "SAME") << twin.dump();
        EXPECT_DOUBLE_EQ(twin["cpu_wait_taken_out"].get<double>(), 0.25);
        EXPECT_EQ(v.kind, std::string(host) == "aaaaaaaaaaaaaaaa" ? verdict_kind::ambiguous
                                                                  : verdict_kind::pass)
            << v.reason;
    }
    // On the blessing host the absolute series is a third slower: waiting, not the code.
    const verdict here = judged(throttled(0.010, 42), on_host("aaaaaaaaaaaaaaaa"));
    const json& absolute = here.timings["step_seconds"];
    EXPECT_EQ(absolute["verdict"], "AMBIGUOUS") << absolute.dump();
    EXPECT_NE(absolute["reason"].get<std::string>().find("waited for a CPU 25%"), std::string::npos)
        << absolute.dump();
    // Slower code under the same quota is still caught by the twin.
    const verdict slower = judged(throttled(0.013, 44), on_host("bbbbbbbbbbbbbbbb"));
    EXPECT_EQ(slower.timings["step_seconds/host_blas"]["verdict"], "PERF_REGRESSION")
        << slower.timings.dump();
}

TEST(Timing, ACpuWaitAboveFivePercentOfASampleIsADisturbance) {
    json s = series({1.0, 1.0, 1.0}, {1.0});
    EXPECT_EQ(cpu_wait_disturbance(s), "");
    s["cpu_wait_share"] = {0.01, 0.04, 0.9};
    EXPECT_EQ(cpu_wait_disturbance(s), ""); // the median sample waited 4%
    s["cpu_wait_share"] = {0.2, 0.3, 0.0};
    EXPECT_EQ(cpu_wait_disturbance(s),
              "its thread waited for a CPU 20% of a sample's time (a CPU quota, or other work on "
              "its core)");
    s["cpu_wait_share"] = {0.2, 0.3}; // not one a sample
    EXPECT_EQ(cpu_wait_disturbance(s), "");
    EXPECT_EQ(cpu_wait_disturbance(json("not a series")), "");
}

TEST(Timing, TheSpreadOfTheBlessedProcessesIsTheLeastTolerance) {
    const json slower = series(around(0.013, 9, 3), around(0.001, 9, 4));
    const verdict tight = judged(slower, on_host("bbbbbbbbbbbbbbbb"));
    EXPECT_EQ(tight.timings["step_seconds/host_blas"]["verdict"], "PERF_REGRESSION")
        << tight.timings.dump();
    json e = entry();
    e["timings"]["step_seconds"]["normalised"]["process_spread"] = 0.4;
    verdict wide{verdict_kind::pass, "as expected"};
    judge_timings(e, {{"samples", {{"step_seconds", slower}}}}, std::nullopt,
                  on_host("bbbbbbbbbbbbbbbb"), wide);
    const json& n = wide.timings["step_seconds/host_blas"];
    EXPECT_NE(n["verdict"], "PERF_REGRESSION") << n.dump();
    EXPECT_DOUBLE_EQ(n["tolerance"].get<double>(), 0.4);
    EXPECT_NE(n["reason"].get<std::string>().find("40% its blessed processes lay apart"),
              std::string::npos)
        << n.dump();
}

TEST(Timing, NormaliseSaysWhichControlIsMissing) {
    std::string why;
    json s = series({1.0}, {1.0});
    s["control_errors"] = {{"gpu_fma", "cudaErrorInsufficientDriver: no driver"}};
    EXPECT_FALSE(normalise(s, "gpu_fma", why));
    EXPECT_NE(why.find("no gpu_fma control"), std::string::npos) << why;
    EXPECT_NE(why.find("cudaErrorInsufficientDriver"), std::string::npos) << why;
    EXPECT_FALSE(normalise(series({1.0}, {0.0, 0.0}), "host_blas", why));
}

// The CTest case of the issue in unit form: the same observation, on another host, is not
// compared absolutely but is judged normalised; on the blessing host both are judged.
TEST(Timing, AnAbsoluteSeriesFromAnotherHostIsNotComparedWhileItsNormalisedTwinIsJudged) {
    // Another host 1.5x slower at everything: the series and its control alike.
    const verdict elsewhere =
        judged(series(around(0.015, 9, 3), around(0.0015, 9, 4)), on_host("bbbbbbbbbbbbbbbb"));
    EXPECT_EQ(elsewhere.timings["step_seconds"]["verdict"], "NOT_COMPARED");
    EXPECT_NE(elsewhere.timings["step_seconds"]["reason"].get<std::string>().find("host"),
              std::string::npos);
    EXPECT_EQ(elsewhere.timings["step_seconds/host_blas"]["verdict"], "SAME")
        << elsewhere.timings.dump();
    EXPECT_EQ(elsewhere.kind, verdict_kind::pass);

    const verdict here =
        judged(series(around(0.010, 9, 5), around(0.001, 9, 6)), on_host("aaaaaaaaaaaaaaaa"));
    EXPECT_EQ(here.timings["step_seconds"]["verdict"], "SAME") << here.timings.dump();
    EXPECT_EQ(here.timings["step_seconds/host_blas"]["verdict"], "SAME");
    EXPECT_TRUE(here.timings["step_seconds"].contains("p_regression"));
}

TEST(Timing, TheNormalisedTwinCatchesSlowerCodeOnAnotherHost) {
    // The code 30% slower on a host like the blessing one: the control did not move.
    const verdict v =
        judged(series(around(0.013, 9, 8), around(0.001, 9, 9)), on_host("bbbbbbbbbbbbbbbb"));
    EXPECT_EQ(v.timings["step_seconds/host_blas"]["verdict"], "PERF_REGRESSION")
        << v.timings.dump();
    EXPECT_EQ(v.kind, verdict_kind::perf_regression);
}

TEST(Timing, AHostControlDoesNotCarryASeriesAcrossCpuGenerations) {
    // Blessed by a scalar control on a CPU OpenBLAS runs as Haswell (a Zen 2 or 3 EPYC); the
    // code 30% slower in the twin's eyes on one it runs as Cooperlake (a Zen 4 EPYC).
    json e = entry();
    e["timings"]["step_seconds"]["normalised"]["by"] = "host_scalar";
    e["provenance"]["fingerprint"] = {{"blas_library", "OpenBLAS 0.3.21"},
                                      {"blas_core", "Haswell"}};
    json s = {{"unit", "s"},
              {"values", around(0.013, 9, 8)},
              {"controls", {{"host_scalar", around(0.001, 9, 9)}}}};
    const auto judge_on = [&](const std::string& blas) {
        judge_context c = on_host("bbbbbbbbbbbbbbbb");
        c.blas = blas;
        verdict v{verdict_kind::pass, "as expected"};
        judge_timings(e, {{"samples", {{"step_seconds", s}}}}, std::nullopt, c, v);
        return v;
    };
    const verdict other = judge_on("OpenBLAS 0.3.21 / Cooperlake");
    const json& twin = other.timings["step_seconds/host_scalar"];
    EXPECT_EQ(twin["verdict"], "NOT_COMPARED") << other.timings.dump();
    EXPECT_NE(
        twin["reason"].get<std::string>().find("runs as Haswell, this one runs as Cooperlake"),
        std::string::npos);
    EXPECT_EQ(other.kind, verdict_kind::pass);
    // The same generation (another OpenBLAS release too): judged, and slower.
    const verdict same = judge_on("OpenBLAS 0.3.26 / Haswell");
    EXPECT_EQ(same.timings["step_seconds/host_scalar"]["verdict"], "PERF_REGRESSION")
        << same.timings.dump();
    // Where the probe learned no kernel type, as before: judged.
    EXPECT_EQ(judge_on("").timings["step_seconds/host_scalar"]["verdict"], "PERF_REGRESSION");
}

TEST(Timing, ASeriesThatLostItsControlFailsRatherThanGoingUnjudged) {
    json s = {{"unit", "s"}, {"values", around(0.010, 9, 10)}};
    const verdict v = judged(s, on_host("bbbbbbbbbbbbbbbb"));
    EXPECT_EQ(v.timings["step_seconds/host_blas"]["verdict"], "PERF_REGRESSION");
    EXPECT_NE(v.reason.find("no host_blas control"), std::string::npos) << v.reason;
}

TEST(Timing, OnTheBlessingHostASlowerControlKeepsAnAbsoluteRegressionFromStanding) {
    // This host runs 30% slower at everything (a busy neighbour): the absolute series is slower,
    // its control too, the normalised twin is the same.
    const verdict v =
        judged(series(around(0.013, 9, 11), around(0.0013, 9, 12)), on_host("aaaaaaaaaaaaaaaa"));
    EXPECT_EQ(v.timings["step_seconds"]["verdict"], "AMBIGUOUS") << v.timings.dump();
    EXPECT_NE(v.timings["step_seconds"]["reason"].get<std::string>().find("host_blas control ran"),
              std::string::npos);
    EXPECT_EQ(v.timings["step_seconds/host_blas"]["verdict"], "SAME");
    EXPECT_EQ(v.kind, verdict_kind::ambiguous);
}

TEST(Timing, ADisturbedSeriesIsAmbiguousAndSaysWhy) {
    const json stolen = {{"cpu", {{"steal_fraction", 0.2}, {"run_queue_mean", 1.0}, {"cpus", 2}}}};
    const verdict v = judged(series(around(0.013, 9, 13), around(0.001, 9, 14), stolen),
                             on_host("bbbbbbbbbbbbbbbb"));
    const json& t = v.timings["step_seconds/host_blas"];
    EXPECT_EQ(t["verdict"], "AMBIGUOUS") << t.dump();
    EXPECT_NE(t["reason"].get<std::string>().find("steal was 20%"), std::string::npos);
    EXPECT_EQ(v.kind, verdict_kind::ambiguous);
    // Not slower: a disturbance is noted, the verdict stays.
    const verdict same = judged(series(around(0.010, 9, 15), around(0.001, 9, 16), stolen),
                                on_host("bbbbbbbbbbbbbbbb"));
    EXPECT_EQ(same.timings["step_seconds/host_blas"]["verdict"], "SAME");
    EXPECT_TRUE(same.timings["step_seconds/host_blas"].contains("disturbed"));
}

TEST(Timing, DisturbanceRules) {
    EXPECT_EQ(controls::disturbed(json()), "");
    EXPECT_EQ(controls::disturbed(
                  {{"cpu", {{"steal_fraction", 0.01}, {"run_queue_mean", 2.0}, {"cpus", 2}}}}),
              "");
    EXPECT_NE(controls::disturbed({{"cpu", {{"run_queue_mean", 3.5}, {"cpus", 2}}}})
                  .find("runnable tasks"),
              std::string::npos);
    // A one-thread case beside a busy neighbour on two cores is judged; a two-thread one is not,
    // nor is one whose CPU quota gives it fewer whole cores than threads.
    EXPECT_EQ(
        controls::disturbed({{"cpu", {{"cpus", 2}, {"threads", 1}, {"others_busy_cores", 1.0}}}}),
        "");
    EXPECT_NE(
        controls::disturbed({{"cpu", {{"cpus", 2}, {"threads", 2}, {"others_busy_cores", 0.9}}}})
            .find("other processes kept 0.9 of 2 CPUs busy"),
        std::string::npos);
    EXPECT_EQ(controls::disturbed({{"cpu", {{"cpus", 2}, {"threads", 1}, {"quota_cores", 0.75}}}}),
              "");
    EXPECT_NE(controls::disturbed({{"cpu", {{"cpus", 2}, {"threads", 2}, {"quota_cores", 0.75}}}})
                  .find("CPU quota allows 0.75 cores"),
              std::string::npos);
    // GPU idle (0x1) and application clocks (0x2) are not disturbances; a thermal slowdown is.
    EXPECT_EQ(controls::disturbed({{"gpu", {{"before", {{"throttle_reasons", 3}}}}}}), "");
    EXPECT_NE(controls::disturbed({{"gpu", {{"after", {{"throttle_reasons", 0x20}}}}}})
                  .find("software thermal slowdown"),
              std::string::npos);
    // Wrong types are no disturbance and no crash.
    EXPECT_EQ(controls::disturbed({{"cpu", "busy"}, {"gpu", {{"before", 7}}}}), "");
}

TEST(Timing, OtherBuildTypesAndRecordOnlyRunsCompareNothing) {
    judge_context debug = on_host("aaaaaaaaaaaaaaaa");
    debug.build_type = "Debug";
    const verdict v = judged(series(around(0.03, 9, 17), around(0.001, 9, 18)), debug);
    EXPECT_EQ(v.timings["step_seconds"]["verdict"], "NOT_COMPARED");
    EXPECT_EQ(v.timings["step_seconds/host_blas"]["verdict"], "NOT_COMPARED");
    EXPECT_EQ(v.kind, verdict_kind::pass);
    judge_context record = on_host("aaaaaaaaaaaaaaaa");
    record.judge_times = false;
    const verdict r = judged(series(around(0.03, 9, 19), around(0.001, 9, 20)), record);
    EXPECT_NE(r.timings["step_seconds/host_blas"]["reason"].get<std::string>().find("record"),
              std::string::npos);
}

// p.adjust(c(0.01, 0.04, 0.03, 0.005), "holm") and "BH" in R: 0.03 0.06 0.06 0.02 and
// 0.02 0.04 0.04 0.02.
TEST(Timing, HolmAndBenjaminiHochbergMatchR) {
    const std::vector<double> p{0.01, 0.04, 0.03, 0.005};
    const auto holm = stats::holm_adjust(p);
    const auto bh = stats::bh_adjust(p);
    const std::vector<double> want_holm{0.03, 0.06, 0.06, 0.02};
    const std::vector<double> want_bh{0.02, 0.04, 0.04, 0.02};
    for (std::size_t i = 0; i < p.size(); ++i) {
        EXPECT_NEAR(holm[i], want_holm[i], 1e-12) << i;
        EXPECT_NEAR(bh[i], want_bh[i], 1e-12) << i;
    }
    EXPECT_TRUE(stats::holm_adjust({}).empty());
    EXPECT_EQ(stats::holm_adjust({0.9, 0.8}), (std::vector<double>{1.0, 1.0}));
    EXPECT_THROW(stats::holm_adjust({0.1, 1.5}), std::invalid_argument);
    EXPECT_THROW(stats::bh_adjust({std::nan("")}), std::invalid_argument);
}

case_record timed_record(const std::string& variant, const std::string& series_verdict, double p) {
    case_record r;
    r.key = {"cpu", "demo", variant};
    r.verdict =
        series_verdict == "PERF_REGRESSION" ? verdict_kind::perf_regression : verdict_kind::pass;
    r.reason = "step_seconds: slower";
    r.timings = {
        {"step_seconds", {{"verdict", series_verdict}, {"reason", "r"}, {"p_regression", p}}},
        {"other", {{"verdict", "NOT_COMPARED"}, {"reason", "elsewhere"}}}};
    return r;
}

TEST(Timing, ARunsCorrectionDemotesARegressionThatIsNotSignificantAmongAllItsSeries) {
    // 20 series; one slower at p = 0.01: significant alone, not among 20 (Holm: 0.2).
    std::vector<case_record> store;
    store.push_back(timed_record("slow", "PERF_REGRESSION", 0.01));
    for (int i = 0; i < 19; ++i)
        store.push_back(timed_record("v" + std::to_string(i), "SAME", 0.5));
    std::vector<case_record*> records;
    records.reserve(store.size());
    for (auto& r : store)
        records.push_back(&r);
    std::vector<case_record*> changed;
    const json family = correct_run_timings(records, timing_correction::holm, 0.05, changed);
    EXPECT_EQ(family["series"], 20);
    ASSERT_EQ(changed.size(), 1u);
    EXPECT_EQ(changed[0]->verdict, verdict_kind::ambiguous);
    EXPECT_NE(changed[0]->reason.find("not significant among the run's 20"), std::string::npos)
        << changed[0]->reason;
    EXPECT_NEAR(store[0].timings["step_seconds"]["p_adjusted"].get<double>(), 0.2, 1e-12);

    // Strong enough to survive the correction: the regression stands.
    store[0] = timed_record("slow", "PERF_REGRESSION", 1e-5);
    changed.clear();
    correct_run_timings(records, timing_correction::holm, 0.05, changed);
    EXPECT_TRUE(changed.empty());
    EXPECT_EQ(store[0].verdict, verdict_kind::perf_regression);

    // No correction: the per-series level alone.
    store[0] = timed_record("slow", "PERF_REGRESSION", 0.01);
    changed.clear();
    correct_run_timings(records, timing_correction::none, 0.05, changed);
    EXPECT_TRUE(changed.empty());
}

TEST(HostIdentity, NamesTheMachineFromItsPartsOrAsTold) {
    ::unsetenv(host_id_env);
    const json fp = {
        {"host", {{"cpu_model", "Test CPU"}}},
        {"libraries", {{"nvml", {{"devices", json::array({{{"uuid", "GPU-1234"}}})}}}}}};
    const json a = host_identity(fp);
    ASSERT_TRUE(a["id"].is_string());
    EXPECT_EQ(a["id"].get<std::string>().size(), 16u);
    EXPECT_EQ(a["from"], "machine");
    EXPECT_EQ(a["parts"]["gpu_uuids"], json::array({"GPU-1234"}));
    EXPECT_EQ(a["parts"]["cpu"]["model"], "Test CPU");
    EXPECT_EQ(host_identity(fp)["id"], a["id"]); // stable
    json other_gpu = fp;
    other_gpu["libraries"]["nvml"]["devices"][0]["uuid"] = "GPU-5678";
    EXPECT_NE(host_identity(other_gpu)["id"], a["id"]); // same model, another card
    // The machine id itself never appears, only its hash.
    std::ifstream machine_id("/etc/machine-id");
    std::string raw;
    if (machine_id && std::getline(machine_id, raw) && !raw.empty()) {
        EXPECT_EQ(a.dump().find(raw), std::string::npos);
    }

    ::setenv(host_id_env, "0123456789abcdef", 1);
    EXPECT_EQ(host_identity(fp)["id"], "0123456789abcdef");
    EXPECT_EQ(host_identity(fp)["from"], host_id_env);
    ::setenv(host_id_env, "an emulated host", 1);
    const std::string named = host_identity(fp)["id"];
    EXPECT_EQ(named.size(), 16u);
    EXPECT_NE(named, a["id"]);
    ::unsetenv(host_id_env);
    EXPECT_EQ(host_id_of({{"host", {{"identity", host_identity(fp)}}}}), a["id"]);
    EXPECT_EQ(host_id_of(json::array()), "");
}

TEST(Timing, BlessKeepsNormalisedSeriesPooledAndRefusesTooFewSamples) {
    observation_origin origin;
    origin.bound_by = {{"step_seconds", "host_blas"}};
    const json a = {{"samples",
                     {{"step_seconds", series({0.010, 0.011, 0.012}, {0.001, 0.001, 0.001})},
                      {"few", {{"unit", "s"}, {"values", {1.0}}}},
                      {"idle", {{"unit", "1"}, {"values", {0.5, 0.5, 0.5}}}}}}};
    const json b = {{"samples", {{"step_seconds", series({0.020, 0.022, 0.024}, {0.002, 0.002})}}}};
    origin.pooled_results = {&a, &b};
    origin.min_samples = 3;
    std::vector<std::string> refused;
    const auto t = expected_timings(a, origin, &refused);
    ASSERT_TRUE(t.contains("step_seconds"));
    EXPECT_FALSE(t.contains("few"));
    EXPECT_FALSE(t.contains("idle")); // a fraction is a finding, not a time
    ASSERT_EQ(refused.size(), 1u);
    EXPECT_NE(refused[0].find("few: 1 sample(s), the judge needs 3"), std::string::npos);
    const auto& n = t["step_seconds"]["normalised"];
    EXPECT_EQ(n["by"], "host_blas");
    EXPECT_EQ(n["samples"].size(), 6u); // both processes' samples
    EXPECT_DOUBLE_EQ(n["control_median"].get<double>(), 0.001);
    EXPECT_DOUBLE_EQ(n["samples"][3].get<double>(), 10.0);
    // The processes' medians: 11 ms and 22 ms absolute (100% apart), 11 and 11 normalised.
    EXPECT_DOUBLE_EQ(t["step_seconds"]["process_spread"].get<double>(), 1.0);
    EXPECT_DOUBLE_EQ(n["process_spread"].get<double>(), 0.0);
}

// A control sample runs as long as the sample beside it, whatever its first (cold) run cost: a
// control a tenth as long as a 10 ms sample slipped between the stalls of a CPU quota and left
// the series looking 1.35x slower on a slower host.
TEST(Timing, ControlSampleLastsAsLongAsTheSample) {
    context ctx("fixture", "timed", backend_kind::cpu, "{}");
    ctx.set_controls({"host_scalar"});
    detail::run_controls(ctx, 0); // the untimed first run
    constexpr double sample_seconds = 0.02;
    const auto t0 = std::chrono::steady_clock::now();
    detail::run_controls(ctx, sample_seconds);
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    // The runs' own times add up to the sample's before the loop stops, and they lie inside the
    // wall time: a lower bound that holds however busy the machine is.
    EXPECT_GE(wall, sample_seconds);
    ctx.record_samples("step_seconds", {0.02}, "s");
    const json result = json::parse(ctx.result_json(status::ok()));
    const json& controls = result["samples"]["step_seconds"]["controls"];
    ASSERT_TRUE(controls.contains("host_scalar")) << result.dump();
    ASSERT_EQ(controls["host_scalar"].size(), 1u); // one sample, the warm-up not among them
    EXPECT_GT(controls["host_scalar"][0].get<double>(), 0.0);
    EXPECT_LT(controls["host_scalar"][0].get<double>(), sample_seconds); // a mean of many runs
}

/// Pins the calling thread to `cpu`, giving back its earlier set when it goes.
class pinned {
public:
    explicit pinned(int cpu) {
        m_ok = pthread_getaffinity_np(pthread_self(), sizeof m_old, &m_old) == 0;
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        m_ok = m_ok && pthread_setaffinity_np(pthread_self(), sizeof one, &one) == 0;
    }
    ~pinned() { pthread_setaffinity_np(pthread_self(), sizeof m_old, &m_old); }
    pinned(const pinned&) = delete;
    pinned& operator=(const pinned&) = delete;
    bool ok() const { return m_ok; }

private:
    cpu_set_t m_old{};
    bool m_ok = false;
};

void spin_for(double seconds) {
    volatile double x = 1;
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < until)
        for (int i = 0; i < 1000; ++i)
            x = x * 1.0000001;
}

// The kernel's run delay, read for real: a second busy thread pinned to this thread's core
// takes about half of it, and the clock says so.
TEST(Timing, TheCpuWaitClockSeesAnotherThreadOnItsCore) {
    if (!controls::thread_cpu_wait_seconds())
        GTEST_SKIP() << "this kernel gives no /proc/thread-self/schedstat";
    pinned here(0);
    if (!here.ok())
        GTEST_SKIP() << "cannot pin a thread to CPU 0 here";
    std::atomic<bool> stop{false};
    std::thread rival([&] {
        pinned there(0);
        volatile double x = 1;
        while (!stop.load(std::memory_order_relaxed))
            x = x * 1.0000001;
    });
    spin_for(0.02); // the rival starts
    controls::cpu_wait_clock waited;
    spin_for(0.3);
    const std::optional<double> share = waited.share();
    stop = true;
    rival.join();
    ASSERT_TRUE(share);
    EXPECT_GT(*share, 0.25) << "two busy threads on one core, and this one waited " << *share;
    EXPECT_LE(*share, 1.0);
}

// What time_samples hands on: a share a sample for the series, and one a control sample for its
// controls, in [0, 1].
TEST(Timing, TimedSamplesCarryTheirCpuWaitShares) {
    if (!controls::thread_cpu_wait_seconds())
        GTEST_SKIP() << "this kernel gives no /proc/thread-self/schedstat";
    context ctx("fixture", "timed", backend_kind::cpu, R"({"samples": 5, "warmup": 1})");
    ctx.set_controls({"host_scalar"});
    const auto seconds = time_samples<cpu_backend>(ctx, [] {
        spin_for(0.002);
        return status::ok();
    });
    ASSERT_TRUE(seconds.is_ok());
    ctx.record_samples("step_seconds", seconds.value(), "s");
    ctx.record_samples("per_item_seconds", {1.0, 2.0, 3.0, 4.0, 5.0}, "s"); // same loop
    ctx.record_samples("other_seconds", {1.0, 2.0}, "s"); // not one a sample: none
    const json result = json::parse(ctx.result_json(status::ok()));
    const json& s = result["samples"];
    ASSERT_EQ(s["step_seconds"]["cpu_wait_share"].size(), 5u) << s.dump();
    EXPECT_EQ(s["per_item_seconds"]["cpu_wait_share"], s["step_seconds"]["cpu_wait_share"]);
    EXPECT_FALSE(s["other_seconds"].contains("cpu_wait_share"));
    const json& control = s["step_seconds"]["control_cpu_wait_share"]["host_scalar"];
    ASSERT_EQ(control.size(), s["step_seconds"]["controls"]["host_scalar"].size()) << s.dump();
    for (const json& x : s["step_seconds"]["cpu_wait_share"])
        EXPECT_TRUE(x.get<double>() >= 0 && x.get<double>() <= 1) << x;
}

} // namespace
