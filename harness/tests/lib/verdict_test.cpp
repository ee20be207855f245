#include "fingerprint/fingerprint.hpp"
#include "judge/baseline.hpp"
#include "model/index.hpp"
#include "run/runner.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace {
using namespace pitfall;
using namespace pitfall::runner;
using nlohmann::json;

json ok_result(const json& extra = json::object()) {
    json r = {{"outcome", {{"status", "ok"}}},
              {"ran_on", "cuda:0 test device"},
              {"checks", json::array()},
              {"measurements", {{"loss", {{"value", 0.5}, {"unit", ""}}}}},
              {"memory",
               {{"tracked_peak_bytes", 1000},
                {"tracked_current_bytes", 0},
                {"limit_bytes", nullptr},
                {"allocations", 1},
                {"failed_allocations", 0}}},
              {"events", json::object()},
              // What the SDK writes for a CUDA case that needs a device and launched its kernels.
              {"gpu_work", {{"kernels", 4}, {"library_calls", 0}, {"required", true}}}};
    r.update(extra);
    return r;
}
observation seen(json outcome, json result = json()) {
    return {std::move(outcome), std::move(result), std::nullopt, std::nullopt};
}
const json oom = {{"status", "error"},
                  {"library", "cuda_runtime"},
                  {"error", "cudaErrorMemoryAllocation"},
                  {"stage", "alloc"},
                  {"sticky", false}};

TEST(Verdict, OutcomesCompareByName) {
    EXPECT_EQ(judge(seen(oom, ok_result({{"outcome", oom}})), {{"outcome", oom}}, "cuda").kind,
              verdict_kind::pass);
    json other = oom;
    other["stage"] = "copy";
    const verdict v =
        judge(seen(other, ok_result({{"outcome", other}})), {{"outcome", oom}}, "cuda");
    EXPECT_EQ(v.kind, verdict_kind::fail);
    EXPECT_NE(v.reason.find("stage differs"), std::string::npos) << v.reason;
}

TEST(Verdict, ExpectedFailureThatStopsIsBehaviourChanged) {
    const verdict v = judge(seen({{"status", "ok"}}, ok_result()), {{"outcome", oom}}, "cuda");
    EXPECT_EQ(v.kind, verdict_kind::fail);
    EXPECT_NE(v.reason.find("behaviour changed"), std::string::npos);
}

TEST(Verdict, CrashesTimeoutsAndSignals) {
    const json segv = {{"status", "signal"}, {"signal", "SIGSEGV"}};
    EXPECT_EQ(judge(seen(segv), json(), "cpu").kind, verdict_kind::crash);
    EXPECT_EQ(judge(seen(segv), {{"outcome", segv}}, "cpu").kind, verdict_kind::pass);
    EXPECT_EQ(
        judge(seen(segv), {{"outcome", {{"status", "signal"}, {"signal", "SIGBUS"}}}}, "cpu").kind,
        verdict_kind::crash);
    EXPECT_EQ(judge(seen({{"status", "timeout"}}), {{"outcome", {{"status", "ok"}}}}, "cpu").kind,
              verdict_kind::timeout);
    EXPECT_EQ(judge(seen({{"status", "exit"}, {"exit_code", 3}}), {{"outcome", {{"status", "ok"}}}},
                    "cpu")
                  .kind,
              verdict_kind::crash);
    const json missing = {{"status", "load_error"}, {"error", "missing library libcudnn.so.9"}};
    EXPECT_EQ(judge(seen(missing), {{"outcome", missing}}, "cuda").kind, verdict_kind::pass);
}

TEST(Verdict, UnsupportedNeverFailsAndNotesAChangedReason) {
    const json seen_unsupported = {
        {"status", "unsupported"}, {"error", "cudaErrorNoDevice"}, {"reason", "r"}};
    const verdict v =
        judge(seen(seen_unsupported),
              {{"outcome", {{"status", "unsupported"}, {"error", "cudaErrorInsufficientDriver"}}}},
              "cuda");
    EXPECT_EQ(v.kind, verdict_kind::unsupported);
    EXPECT_FALSE(is_failing(v.kind));
    EXPECT_NE(v.reason.find("baseline expected cudaErrorInsufficientDriver"), std::string::npos);
}

TEST(Verdict, ChecksBoundsAndMemory) {
    const json expected = {{"outcome", {{"status", "ok"}}}};
    json failed_check = ok_result(
        {{"checks", json::array({{{"name", "agree"}, {"passed", false}, {"detail", "d"}}})}});
    EXPECT_EQ(judge(seen({{"status", "ok"}}, failed_check), expected, "cpu").kind,
              verdict_kind::numeric_mismatch);
    json bounded = expected;
    bounded["measurements"] = {{"loss", {{"max", 0.4}}}};
    const verdict v = judge(seen({{"status", "ok"}}, ok_result()), bounded, "cpu");
    EXPECT_EQ(v.kind, verdict_kind::numeric_mismatch);
    EXPECT_NE(v.reason.find("loss = 0.5 above max 0.4"), std::string::npos) << v.reason;
    json mem = expected;
    mem["memory"] = {{"tracked_peak_bytes", {{"max", 999}}}};
    EXPECT_EQ(judge(seen({{"status", "ok"}}, ok_result()), mem, "cpu").kind,
              verdict_kind::mem_regression);
    mem["memory"] = {{"tracked_peak_bytes", {{"max", 1000}}}};
    EXPECT_EQ(judge(seen({{"status", "ok"}}, ok_result()), mem, "cpu").kind, verdict_kind::pass);
}

TEST(Verdict, FullSizesJudgeOutcomesAndChecksOnly) {
    // Baselines hold the quick defaults' numbers: a --full run's larger measurements, memory
    // and times are not compared, but its outcome and its own checks still are.
    judge_context full;
    full.full_sizes = true;
    json expected = {{"outcome", {{"status", "ok"}}},
                     {"measurements", {{"loss", {{"max", 0.4}}}}},
                     {"memory", {{"tracked_peak_bytes", {{"max", 999}}}}},
                     {"timings", {{"step_seconds", {{"median", 1.0}}}}}};
    const verdict v = judge(seen({{"status", "ok"}}, ok_result()), expected, "cpu", full);
    EXPECT_EQ(v.kind, verdict_kind::pass);
    EXPECT_NE(v.reason.find("--full"), std::string::npos) << v.reason;
    EXPECT_EQ(v.timings["step_seconds"]["verdict"], "NOT_COMPARED");
    json failed_check = ok_result(
        {{"checks", json::array({{{"name", "agree"}, {"passed", false}, {"detail", "d"}}})}});
    EXPECT_EQ(judge(seen({{"status", "ok"}}, failed_check), expected, "cpu", full).kind,
              verdict_kind::numeric_mismatch);
    EXPECT_EQ(judge(seen(oom, ok_result({{"outcome", oom}})), expected, "cuda", full).kind,
              verdict_kind::fail);
    EXPECT_EQ(judge(seen({{"status", "ok"}}, ok_result()), expected, "cpu").kind,
              verdict_kind::numeric_mismatch); // the same entry bites at the quick sizes
}

TEST(Verdict, GpuAskedForCpuUsedFails) {
    const verdict v = judge(seen({{"status", "ok"}}, ok_result({{"ran_on", "cpu: fallback"}})),
                            {{"outcome", {{"status", "ok"}}}}, "cuda");
    EXPECT_EQ(v.kind, verdict_kind::fail);
    EXPECT_NE(v.reason.find("GPU asked for, CPU used"), std::string::npos);
}

// ran_on is the case's own words; the SDK's count of GPU work is the evidence behind them.
TEST(Verdict, AGpuClaimWithZeroCountedLaunchesFails) {
    const json ok_baseline = {{"outcome", {{"status", "ok"}}}};
    const json h100 = {{"ran_on", "cuda:0 NVIDIA H100 80GB HBM3 (sm_90, 132 SMs)"}};
    json claimed = ok_result(h100);
    claimed["gpu_work"] = {{"kernels", 0}, {"library_calls", 0}, {"required", true}};
    judge_context one_gpu;
    one_gpu.gpu_count = 1;
    const verdict v = judge(seen({{"status", "ok"}}, claimed), ok_baseline, "cuda", one_gpu);
    EXPECT_EQ(v.kind, verdict_kind::fail);
    EXPECT_NE(v.reason.find("GPU asked for, no GPU work counted"), std::string::npos) << v.reason;
    // Without a baseline too: the claim is judged before the baseline is looked at.
    EXPECT_EQ(judge(seen({{"status", "ok"}}, claimed), json(), "cuda", one_gpu).kind,
              verdict_kind::fail);

    // One counted kernel, or one accepted cuBLAS call, backs the claim.
    json kernels = claimed, gemm = claimed;
    kernels["gpu_work"]["kernels"] = 12;
    gemm["gpu_work"]["library_calls"] = 3;
    EXPECT_EQ(judge(seen({{"status", "ok"}}, kernels), ok_baseline, "cuda", one_gpu).kind,
              verdict_kind::pass);
    EXPECT_EQ(judge(seen({{"status", "ok"}}, gemm), ok_baseline, "cuda", one_gpu).kind,
              verdict_kind::pass);

    // A count the device could not give (a sticky fault) does not back a success either.
    json faulted = claimed;
    faulted["gpu_work"] = {{"error", "cudaErrorIllegalAddress"}, {"required", true}};
    const verdict f = judge(seen({{"status", "ok"}}, faulted), ok_baseline, "cuda", one_gpu);
    EXPECT_EQ(f.kind, verdict_kind::fail);
    EXPECT_NE(f.reason.find("could not be counted: cudaErrorIllegalAddress"), std::string::npos);

    // Any claim but the CPU's is held to the count, whatever its words ("gpu0", "H100").
    json worded = claimed;
    worded["ran_on"] = "H100";
    EXPECT_EQ(judge(seen({{"status", "ok"}}, worded), ok_baseline, "cuda", one_gpu).kind,
              verdict_kind::fail);
    // A result no SDK wrote (no gpu_work) backs no claim.
    json unwritten = claimed;
    unwritten.erase("gpu_work");
    const verdict u = judge(seen({{"status", "ok"}}, unwritten), ok_baseline, "cuda", one_gpu);
    EXPECT_EQ(u.kind, verdict_kind::fail);
    EXPECT_NE(u.reason.find("the result has no gpu_work"), std::string::npos) << u.reason;

    // Not judged: a case that needs no device (version queries), a failing outcome the baseline
    // expects, a CPU claim a baseline expects (a reproduced silent fallback), the CPU backend.
    json not_required = claimed;
    not_required["gpu_work"] = {{"required", false}};
    EXPECT_EQ(judge(seen({{"status", "ok"}}, not_required), ok_baseline, "cuda", one_gpu).kind,
              verdict_kind::pass);
    json oom_result = claimed;
    oom_result["outcome"] = oom;
    EXPECT_EQ(judge(seen(oom, oom_result), {{"outcome", oom}}, "cuda", one_gpu).kind,
              verdict_kind::pass);
    json fallback = claimed;
    fallback["ran_on"] = "cpu: silent fallback after cudaErrorNoDevice";
    EXPECT_EQ(judge(seen({{"status", "ok"}}, fallback),
                    {{"outcome", {{"status", "ok"}}}, {"ran_on", "cpu"}}, "cuda", one_gpu)
                  .kind,
              verdict_kind::pass);
    json on_cpu = unwritten;
    on_cpu["ran_on"] = "cpu: AMD EPYC, 2 threads";
    EXPECT_EQ(judge(seen({{"status", "ok"}}, on_cpu), ok_baseline, "cpu", one_gpu).kind,
              verdict_kind::pass);
    EXPECT_EQ(judge(seen({{"status", "ok"}}, ok_result(h100)), ok_baseline, "cuda", one_gpu).kind,
              verdict_kind::pass);
}

TEST(Verdict, ABaselineCanExpectWhereACaseRan) {
    json expected = {{"outcome", {{"status", "ok"}}}, {"ran_on", "cpu"}};
    const json fallback = ok_result({{"ran_on", "cpu: silent fallback"}});
    EXPECT_EQ(judge(seen({{"status", "ok"}}, fallback), expected, "cuda").kind, verdict_kind::pass);
    const verdict v = judge(seen({{"status", "ok"}}, ok_result()), expected, "cuda");
    EXPECT_EQ(v.kind, verdict_kind::fail);
    EXPECT_NE(v.reason.find("expected to run on 'cpu...'"), std::string::npos) << v.reason;
}

TEST(Verdict, UnsupportedWhereTheBaselineRunsIsBehaviourChanged) {
    const json seen_unsupported = {{"status", "unsupported"},
                                   {"error", "cudaErrorInsufficientDriver"},
                                   {"reason", "cudaErrorInsufficientDriver: no driver"}};
    const verdict v = judge(seen(seen_unsupported), {{"outcome", {{"status", "ok"}}}}, "cuda");
    EXPECT_EQ(v.kind, verdict_kind::fail);
    EXPECT_NE(v.reason.find("now unsupported"), std::string::npos) << v.reason;
}

TEST(Verdict, ExpectedEventsAreCompared) {
    const json refused = {
        {"status", "error"}, {"library", "cudnn"}, {"error", "CUDNN_STATUS_NOT_SUPPORTED"}};
    json expected = {{"outcome", {{"status", "ok"}}}, {"events", {{"cudnn_double", refused}}}};
    EXPECT_EQ(judge(seen({{"status", "ok"}}, ok_result({{"events", {{"cudnn_double", refused}}}})),
                    expected, "cuda")
                  .kind,
              verdict_kind::pass);
    const verdict accepted = judge(
        seen({{"status", "ok"}}, ok_result({{"events", {{"cudnn_double", {{"status", "ok"}}}}}})),
        expected, "cuda");
    EXPECT_EQ(accepted.kind, verdict_kind::fail);
    EXPECT_NE(accepted.reason.find("event cudnn_double"), std::string::npos) << accepted.reason;
    const verdict missing = judge(seen({{"status", "ok"}}, ok_result()), expected, "cuda");
    EXPECT_EQ(missing.kind, verdict_kind::fail);
}

TEST(Verdict, NoBaselineWarns) {
    const verdict v = judge(seen({{"status", "ok"}}, ok_result()), json(), "cpu");
    EXPECT_EQ(v.kind, verdict_kind::no_baseline);
    EXPECT_FALSE(is_failing(v.kind));
}

TEST(Profiles, MostSpecificMatchWins) {
    std::vector<profile> profiles(3);
    profiles[0].name = "any";
    profiles[0].match = json::object();
    profiles[1].name = "no-gpu";
    profiles[1].match = {{"gpu_count", 0}};
    profiles[2].name = "hopper";
    profiles[2].match = {{"compute_capability", json::array({"9.0"})},
                         {"gpu_count", json::array({1, 2, 4, 8})}};
    auto none = choose_profile(profiles, {{"gpu_count", 0}}, "");
    ASSERT_TRUE(none.is_ok());
    EXPECT_EQ(none->chosen->name, "no-gpu");
    ASSERT_EQ(none->chain.size(), 2u); // then "any", for the cases no-gpu has no entry for
    EXPECT_EQ(none->chain[1]->name, "any");
    auto h100 = choose_profile(profiles, {{"gpu_count", 1}, {"compute_capability", "9.0"}}, "");
    EXPECT_EQ(h100->chosen->name, "hopper");
    auto ada = choose_profile(profiles, {{"gpu_count", 1}, {"compute_capability", "8.9"}}, "");
    EXPECT_EQ(ada->chosen->name, "any");
    profiles[2].match["cuda_runtime_version"] = {{"min", 13000}, {"max", 13999}};
    EXPECT_EQ(
        choose_profile(
            profiles,
            {{"gpu_count", 1}, {"compute_capability", "9.0"}, {"cuda_runtime_version", 13010}}, "")
            ->chosen->name,
        "hopper");
    EXPECT_EQ(
        choose_profile(
            profiles,
            {{"gpu_count", 1}, {"compute_capability", "9.0"}, {"cuda_runtime_version", 12040}}, "")
            ->chosen->name,
        "any");
    auto forced = choose_profile(profiles, {{"gpu_count", 1}}, "no-gpu");
    EXPECT_EQ(forced->chosen->name, "no-gpu");
    auto unknown = choose_profile(profiles, {{"gpu_count", 1}}, "volta");
    ASSERT_FALSE(unknown.is_ok());
    EXPECT_NE(unknown.error().message().find("known: any, no-gpu, hopper"), std::string::npos);
}
TEST(Verdict, BoundForms) {
    EXPECT_FALSE(bound_violation("x", {{"min", 1}, {"max", 2}}, 1.5));
    EXPECT_EQ(*bound_violation("x", {{"max", 2}}, 3), "x = 3 above max 2");
    EXPECT_FALSE(bound_violation("b", {{"equals", 8192}}, 8192));
    EXPECT_EQ(*bound_violation("b", {{"equals", 8192}}, 9011), "b = 9011, expected exactly 8192");
    EXPECT_FALSE(bound_violation("rss", {{"value", 100}, {"rel_tol", 0.25}}, 125));
    EXPECT_TRUE(bound_violation("rss", {{"value", 100}, {"rel_tol", 0.25}}, 126));
    EXPECT_TRUE(bound_violation("rss", {{"value", 100}, {"rel_tol", 0.25}}, 74));
    EXPECT_FALSE(bound_violation("e", {{"value", 0}, {"abs_tol", 1e-6}}, 5e-7));
    EXPECT_TRUE(bound_violation("nan", {{"min", 0}}, std::nan("")));
}

TEST(Verdict, PeakRssIsJudgedFromTheProcess) {
    json expected = {{"outcome", {{"status", "ok"}}},
                     {"memory", {{"peak_rss_bytes", {{"value", 1e6}, {"rel_tol", 0.1}}}}}};
    observation o = seen({{"status", "ok"}}, ok_result());
    o.peak_rss_bytes = 1.05e6;
    EXPECT_EQ(judge(o, expected, "cpu").kind, verdict_kind::pass);
    o.peak_rss_bytes = 1.2e6;
    const verdict v = judge(o, expected, "cpu");
    EXPECT_EQ(v.kind, verdict_kind::mem_regression);
    EXPECT_NE(v.reason.find("peak_rss_bytes"), std::string::npos) << v.reason;
}

// A peak RSS an observed entry carries was measured on one machine and build: another one
// (a CPU-only build maps none of the CUDA libraries) is not held to it; its tracked bytes are.
TEST(Verdict, BlessedPeakRssOnlyUnderTheSameFingerprint) {
    const json expected = {
        {"outcome", {{"status", "ok"}}},
        {"memory",
         {{"peak_rss_bytes", {{"value", 2e8}, {"rel_tol", 0.25}}},
          {"tracked_peak_bytes", {{"equals", 1000}}}}},
        {"provenance", {{"kind", "observed"}, {"fingerprint_id", "00000000000000aa"}}}};
    observation o = seen({{"status", "ok"}}, ok_result());
    o.peak_rss_bytes = 1e7;
    judge_context same;
    same.fingerprint_id = "00000000000000aa";
    EXPECT_EQ(judge(o, expected, "cpu", same).kind, verdict_kind::mem_regression);
    judge_context elsewhere;
    elsewhere.fingerprint_id = "00000000000000bb";
    EXPECT_EQ(judge(o, expected, "cpu", elsewhere).kind, verdict_kind::pass);
    o.result["memory"]["tracked_peak_bytes"] = 1001;
    EXPECT_EQ(judge(o, expected, "cpu", elsewhere).kind, verdict_kind::mem_regression);
}

std::vector<double> around(double centre, std::size_t n) {
    std::vector<double> v;
    for (std::size_t i = 0; i < n; ++i) // +-1% spread, deterministic
        v.push_back(centre * (1.0 + 0.01 * (static_cast<double>(i % 5) - 2.0) / 2.0));
    return v;
}

TEST(Verdict, AbsoluteTimingsOnlyOnTheHostAndUnderTheFingerprintTheyWereBlessedWith) {
    json result =
        ok_result({{"samples", {{"step", {{"unit", "s"}, {"values", around(1.3, 15)}}}}}});
    json expected = {{"outcome", {{"status", "ok"}}},
                     {"timings", {{"step", {{"unit", "s"}, {"samples", around(1.0, 15)}}}}},
                     {"provenance",
                      {{"kind", "observed"},
                       {"fingerprint_id", "00000000000000aa"},
                       {"host_id", "000000000000000a"}}}};
    judge_context same;
    same.fingerprint_id = "00000000000000aa";
    same.host_id = "000000000000000a";
    const verdict slow = judge(seen({{"status", "ok"}}, result), expected, "cuda", same);
    EXPECT_EQ(slow.kind, verdict_kind::perf_regression) << slow.reason;
    EXPECT_TRUE(is_failing(slow.kind));
    judge_context elsewhere = same;
    elsewhere.fingerprint_id = "00000000000000bb";
    const verdict other = judge(seen({{"status", "ok"}}, result), expected, "cuda", elsewhere);
    EXPECT_EQ(other.kind, verdict_kind::pass) << other.reason;
    EXPECT_EQ(other.timings["step"]["verdict"], "NOT_COMPARED");
    // Another machine of the same kind (the same fingerprint): not compared either.
    judge_context twin = same;
    twin.host_id = "000000000000000b";
    EXPECT_EQ(
        judge(seen({{"status", "ok"}}, result), expected, "cuda", twin).timings["step"]["verdict"],
        "NOT_COMPARED");
    result["samples"]["step"]["values"] = around(1.0, 15);
    const verdict same_speed = judge(seen({{"status", "ok"}}, result), expected, "cuda", same);
    EXPECT_EQ(same_speed.kind, verdict_kind::pass) << same_speed.reason;
    EXPECT_EQ(same_speed.timings["step"]["verdict"], "SAME");
    EXPECT_FALSE(is_failing(verdict_kind::ambiguous));
}

TEST(Verdict, TimingsOnlyAtTheThreadCountTheyWereBlessedWith) {
    const json result =
        ok_result({{"samples", {{"step", {{"unit", "s"}, {"values", around(1.3, 15)}}}}}});
    json expected = {{"outcome", {{"status", "ok"}}},
                     {"timings", {{"step", {{"unit", "s"}, {"samples", around(1.0, 15)}}}}},
                     {"provenance",
                      {{"kind", "observed"},
                       {"fingerprint_id", "00000000000000aa"},
                       {"host_id", "000000000000000a"},
                       {"threads", 2}}}};
    judge_context same;
    same.fingerprint_id = "00000000000000aa";
    same.host_id = "000000000000000a";
    observation one_thread = seen({{"status", "ok"}}, result);
    one_thread.threads = 1;
    const verdict other = judge(one_thread, expected, "cpu", same);
    EXPECT_EQ(other.kind, verdict_kind::pass) << other.reason;
    EXPECT_EQ(other.timings["step"]["verdict"], "NOT_COMPARED");
    EXPECT_NE(other.timings["step"]["reason"].get<std::string>().find("blessed with 2"),
              std::string::npos)
        << other.timings["step"];

    observation two_threads = one_thread;
    two_threads.threads = 2; // the same count: judged, and 30% slower fails
    EXPECT_EQ(judge(two_threads, expected, "cpu", same).kind, verdict_kind::perf_regression);

    expected["provenance"].erase("threads"); // blessed before counts were recorded
    const verdict unknown = judge(one_thread, expected, "cpu", same);
    EXPECT_EQ(unknown.timings["step"]["verdict"], "NOT_COMPARED") << unknown.timings;
}

observation_origin origin() {
    observation_origin o;
    o.fingerprint_summary = {{"gpu_count", 0}};
    o.fingerprint_id = "0123456789abcdef";
    o.date = "2026-11-23";
    o.pitfall_version = "9.8.7";
    o.run_folder = "2026-11-23T10-00-00Z";
    o.run_started = "2026-11-23T10:00:00Z";
    return o;
}

TEST(Verdict, EntryFromRecordKeepsHandWrittenBounds) {
    json record = {
        {"record", "case"},
        {"case", "cpu.s.v"},
        {"verdict", "PASS"},
        {"observed", oom},
        {"process", {{"peak_rss_bytes", 5000000}, {"peak_rss_method", "case"}, {"threads", 1}}},
        {"result",
         ok_result({{"outcome", oom},
                    {"samples", {{"step", {{"unit", "s"}, {"values", around(0.2, 9)}}}}}})}};
    const json previous = {{"outcome", {{"status", "ok"}}},
                           {"measurements", {{"loss", {{"max", 1}}}}},
                           {"provenance", {{"kind", "documented"}, {"source", "guide"}}}};
    const auto parsed = case_record::from_json(record);
    ASSERT_TRUE(parsed.is_ok()) << parsed.error().message();
    const json e(entry_from_record(parsed.value(), nlohmann::ordered_json(previous), origin()));
    EXPECT_EQ(e["outcome"]["error"], "cudaErrorMemoryAllocation");
    EXPECT_EQ(e["measurements"], previous["measurements"]);
    EXPECT_EQ(e["memory"]["tracked_peak_bytes"]["equals"], 1000);
    EXPECT_EQ(e["memory"]["peak_rss_bytes"]["rel_tol"], 0.25);
    EXPECT_EQ(e["provenance"]["rss_method"], "case");
    // wait4's figure (a record without the case's own) is not blessed: it counts pitfall's image.
    json old_record = record;
    old_record["process"].erase("peak_rss_method");
    const json without(entry_from_record(case_record::from_json(old_record).value(),
                                         nlohmann::ordered_json(previous), origin()));
    EXPECT_FALSE(without["memory"].contains("peak_rss_bytes"));
    EXPECT_FALSE(without["provenance"].contains("rss_method"));
    EXPECT_EQ(e["timings"]["step"]["samples"].size(), 9u);
    EXPECT_EQ(e["ran_on"], "cuda"); // the proof "cuda:0 test device", up to its ':'
    EXPECT_EQ(e["provenance"]["kind"], "observed");
    EXPECT_EQ(e["provenance"]["fingerprint_id"], "0123456789abcdef");
    EXPECT_EQ(e["provenance"]["threads"], 1); // the count its times hold at
    EXPECT_EQ(e["provenance"]["source"], "guide");
}

// ---- ratio entries: bounds with their provenance ---------------------------------------------

const json documented_min_2 = {
    {"min", 2},
    {"note", "why 2"},
    {"provenance", {{"kind", "documented"}, {"source", "docs/cuda-rules.md#numbers"}}}};

json observed_around_1(const std::string& fingerprint_id) {
    return {{"min", 0.5},
            {"max", 2},
            {"observed", 1.0},
            {"provenance",
             {{"kind", "observed"},
              {"date", "2026-11-25"},
              {"fingerprint", {{"gpu_count", 0}}},
              {"fingerprint_id", fingerprint_id},
              {"pitfall_version", "0.1.0"}}}};
}

TEST(Ratios, DocumentedBoundsAreJudgedOnEveryMachineOfTheProfile) {
    const json pass = judge_ratio("r", 2.5, documented_min_2, "00000000000000aa");
    EXPECT_EQ(pass["verdict"], "PASS");
    EXPECT_EQ(pass["failing"], false);
    EXPECT_EQ(pass["bound"], (json{{"min", 2}})); // the bound alone, for reports and charts
    EXPECT_EQ(pass["provenance"]["kind"], "documented");
    const json slow = judge_ratio("r", 1.5, documented_min_2, "");
    EXPECT_EQ(slow["verdict"], "PERF_REGRESSION");
    EXPECT_EQ(slow["failing"], true);
    EXPECT_EQ(slow["reason"], "r = 1.5 below min 2 (documented bound: docs/cuda-rules.md#numbers)");
    // A bound written before provenance existed still gates.
    EXPECT_EQ(judge_ratio("r", 1.5, {{"min", 2}}, "")["verdict"], "PERF_REGRESSION");
}

TEST(Ratios, ObservedBoundsAreJudgedOnlyUnderTheirFingerprint) {
    const json bound = observed_around_1("00000000000000aa");
    EXPECT_EQ(judge_ratio("r", 1.2, bound, "00000000000000aa")["verdict"], "PASS");
    const json out = judge_ratio("r", 3.0, bound, "00000000000000aa");
    EXPECT_EQ(out["verdict"], "PERF_REGRESSION");
    EXPECT_EQ(out["reason"], "r = 3 above max 2");
    const json elsewhere = judge_ratio("r", 3.0, bound, "00000000000000bb");
    EXPECT_EQ(elsewhere["verdict"], "NOT_COMPARED");
    EXPECT_EQ(elsewhere["failing"], false);
    EXPECT_NE(elsewhere["reason"].get<std::string>().find("00000000000000aa"), std::string::npos);
}

TEST(Ratios, BlessedEntryIsAWideObservedBoundRoundedOutwards) {
    const nlohmann::ordered_json previous = {{"note", "kept"}, {"min", 9}};
    const json e(ratio_entry_from_run(1.23456, 2.0, previous, {{"gpu_count", 0}},
                                      "0123456789abcdef", "0.1.0", "2026-11-25"));
    EXPECT_EQ(e["min"], 0.617); // 0.61728 rounded down to 3 digits
    EXPECT_EQ(e["max"], 2.47);  // 2.46912 rounded up
    EXPECT_EQ(e["observed"], 1.235);
    EXPECT_EQ(e["note"], "kept");
    EXPECT_EQ(e["provenance"], (json{{"kind", "observed"},
                                     {"date", "2026-11-25"},
                                     {"fingerprint", {{"gpu_count", 0}}},
                                     {"fingerprint_id", "0123456789abcdef"},
                                     {"pitfall_version", "0.1.0"}}));
    // A value already on 3 digits stays itself (0.615 / 0.001 is 614.999... in binary).
    const json exact(ratio_entry_from_run(1.23, 2.0, nullptr, json::object(), "0123456789abcdef",
                                          "0.1.0", "2026-11-25"));
    EXPECT_EQ(exact["min"], 0.615);
    EXPECT_EQ(exact["max"], 2.46);
}

TEST(Ratios, BlessedFromSeveralRunsTheBoundWidensTheirSpan) {
    // Three runs of one H200 measured a launch-bound ratio 36.8, 37.1 and 55.0; a fourth run of
    // unchanged code gave 85.8, outside [median / 2, median x 2] = [18.5, 74.2].
    const json e(ratio_entry_from_runs({37.1, 36.8, 55.0}, 2.0, nullptr, json::object(),
                                       "0123456789abcdef", "0.1.0", "2026-11-28"));
    EXPECT_EQ(e["min"], 18.4);
    EXPECT_EQ(e["max"], 110.0);
    EXPECT_EQ(e["observed"], 37.1);
    EXPECT_EQ(judge_ratio("r", 85.8, e, "0123456789abcdef")["verdict"], "PASS");
    EXPECT_EQ(judge_ratio("r", 111.0, e, "0123456789abcdef")["verdict"], "PERF_REGRESSION");
}

scenario_entry ratio_scenario() {
    auto m = parse_manifest(R"({"name": "s", "summary": "s", "failure_class": "c",
        "backends": ["cpu", "cuda"], "variants": [{"name": "a", "kind": "reproduce"},
        {"name": "b", "kind": "remedy"}],
        "ratios": [{"name": "a_over_b", "numerator": "a", "denominator": "b", "samples": "t"}]})",
                            "s.json");
    EXPECT_TRUE(m.is_ok()) << m.error().message();
    return {"", "s.json", m.is_ok() ? m.value() : manifest{}, ""};
}

/// The loader's verdict on a file bounding cuda.a_over_b with `entry`: "" when accepted.
std::string ratio_file_error(const json& entry) {
    const json doc = {{"schema", "pitfall.expected/1"},
                      {"scenario", "s"},
                      {"cases", json::object()},
                      {"ratios", {{"cuda.a_over_b", entry}}}};
    const status s = validate_expected("expected/p/s.json", doc, ratio_scenario());
    return s.is_ok() ? "" : s.message();
}

TEST(Ratios, TheLoaderAcceptsBoundsWithProvenanceAndRefusesOnesWithoutASource) {
    EXPECT_EQ(ratio_file_error(documented_min_2), "");
    EXPECT_EQ(ratio_file_error(observed_around_1("0123456789abcdef")), "");
    // Where a bound's numbers come from is part of it, and a source names something checkable.
    EXPECT_NE(ratio_file_error({{"max", 4}}).find("/ratios/cuda.a_over_b"), std::string::npos);
    json vague = documented_min_2;
    vague["provenance"]["source"] = "from a book I once read";
    EXPECT_NE(ratio_file_error(vague).find("/ratios/cuda.a_over_b/provenance/source"),
              std::string::npos)
        << ratio_file_error(vague);
    json no_source = documented_min_2;
    no_source["provenance"].erase("source");
    EXPECT_NE(ratio_file_error(no_source).find("/ratios/cuda.a_over_b/provenance"),
              std::string::npos)
        << ratio_file_error(no_source);
    json empty_source = documented_min_2;
    empty_source["provenance"]["source"] = "";
    EXPECT_NE(ratio_file_error(empty_source).find("/ratios/cuda.a_over_b/provenance/source"),
              std::string::npos)
        << ratio_file_error(empty_source);
    json unmeasured = observed_around_1("0123456789abcdef");
    unmeasured.erase("observed");
    EXPECT_NE(ratio_file_error(unmeasured).find("/ratios/cuda.a_over_b"), std::string::npos);
    json documented_with_value = documented_min_2;
    documented_with_value["observed"] = 2.5;
    EXPECT_NE(ratio_file_error(documented_with_value), "");
    json anonymous = observed_around_1("0123456789abcdef");
    anonymous["provenance"].erase("fingerprint_id");
    EXPECT_NE(ratio_file_error(anonymous).find("fingerprint_id"), std::string::npos);
    json coloured = documented_min_2;
    coloured["colour"] = "red";
    EXPECT_NE(ratio_file_error(coloured).find("colour"), std::string::npos);
    EXPECT_NE(ratio_file_error({{"note", "a note is no bound"}}), "");
}

// A case sized from the device's memory: its tracked peak is judged as a fraction of the
// measurement it sized itself from, so a device with other memory judges the same program alike.
TEST(Verdict, TrackedBytesPerAMeasurementFollowTheDevice) {
    const json expected = {
        {"outcome", {{"status", "ok"}}},
        {"memory",
         {{"tracked_peak_bytes", {{"per", "budget_bytes"}, {"value", 0.5}, {"rel_tol", 0.02}}}}}};
    const auto on_device = [](double budget, double peak) {
        json r = ok_result();
        r["measurements"]["budget_bytes"] = {{"value", budget}, {"unit", "B"}};
        r["memory"]["tracked_peak_bytes"] = peak;
        return seen({{"status", "ok"}}, r);
    };
    EXPECT_EQ(judge(on_device(80e9, 40e9), expected, "cuda").kind, verdict_kind::pass);
    EXPECT_EQ(judge(on_device(141e9, 70.9e9), expected, "cuda").kind, verdict_kind::pass);
    const verdict more = judge(on_device(80e9, 48e9), expected, "cuda");
    EXPECT_EQ(more.kind, verdict_kind::mem_regression);
    EXPECT_NE(
        more.reason.find("tracked_peak_bytes / budget_bytes = 0.6, expected 0.5 +- 0.01 (2%)"),
        std::string::npos)
        << more.reason;
    // Without the measurement there is nothing to divide by: not a pass.
    const verdict unsized = judge(seen({{"status", "ok"}}, ok_result()), expected, "cuda");
    EXPECT_EQ(unsized.kind, verdict_kind::mem_regression);
    EXPECT_EQ(unsized.reason,
              "tracked_peak_bytes is judged per budget_bytes, a measurement this case did not "
              "record");
    EXPECT_EQ(judge(on_device(0, 40e9), expected, "cuda").kind, verdict_kind::mem_regression);
}

// bless writes the fraction for a variant that names its measurement (and recorded it), the
// exact bytes otherwise; the loader takes a bound per a measurement for memory only, never
// with equals.
TEST(Verdict, EntryFromRecordBlessesTrackedBytesPerTheVariantsMeasurement) {
    json result = ok_result();
    result["measurements"]["budget_bytes"] = {{"value", 4000.0}, {"unit", "B"}};
    const auto parsed = case_record::from_json({{"record", "case"},
                                                {"case", "cuda.s.a"},
                                                {"verdict", "NO_BASELINE"},
                                                {"observed", {{"status", "ok"}}},
                                                {"result", result}});
    ASSERT_TRUE(parsed.is_ok()) << parsed.error().message();
    observation_origin per = origin();
    per.memory_per = "budget_bytes";
    EXPECT_EQ(json(entry_from_record(parsed.value(), {}, per))["memory"]["tracked_peak_bytes"],
              (json{{"per", "budget_bytes"}, {"value", 0.25}, {"rel_tol", 0.02}}));
    per.memory_per = "free_bytes"; // not recorded by this case: the exact bytes
    EXPECT_EQ(json(entry_from_record(parsed.value(), {}, per))["memory"]["tracked_peak_bytes"],
              (json{{"equals", 1000}}));
    EXPECT_EQ(json(entry_from_record(parsed.value(), {}, origin()))["memory"]["tracked_peak_bytes"],
              (json{{"equals", 1000}}));

    const auto file_error = [](const json& memory) {
        const json doc = {{"schema", "pitfall.expected/1"},
                          {"scenario", "s"},
                          {"cases",
                           {{"cuda.a",
                             {{"outcome", {{"status", "ok"}}},
                              {"memory", memory},
                              {"provenance",
                               {{"kind", "documented"},
                                {"source", "docs/cuda-rules.md#runtime-error-names"}}}}}}}};
        const status s = validate_expected("expected/p/s.json", doc, ratio_scenario());
        return s.is_ok() ? "" : s.message();
    };
    EXPECT_EQ(file_error({{"tracked_peak_bytes",
                           {{"per", "budget_bytes"}, {"value", 0.25}, {"rel_tol", 0.02}}}}),
              "");
    EXPECT_EQ(file_error({{"tracked_peak_bytes", {{"per", "budget_bytes"}, {"max", 0.3}}}}), "");
    for (const json& bad : {json{{"per", "budget_bytes"}, {"equals", 0.25}},
                            json{{"per", 7}, {"max", 0.3}}, json{{"per", ""}, {"max", 0.3}}})
        EXPECT_NE(file_error({{"tracked_peak_bytes", bad}}).find("tracked_peak_bytes"),
                  std::string::npos)
            << bad;
}

// Everything a bless observed is evidence in the entry: when, the fingerprint summary (an
// object) and its id, the pitfall that ran the case, and which case of which run.
TEST(Verdict, EntryFromRecordCarriesTheEvidenceOfTheRun) {
    const json record = {{"record", "case"},
                         {"case", "cuda.s.v"},
                         {"verdict", "NO_BASELINE"},
                         {"observed", {{"status", "ok"}}},
                         {"process", {{"peak_rss_bytes", 5000000}}},
                         {"result", ok_result()}};
    const auto parsed = case_record::from_json(record);
    ASSERT_TRUE(parsed.is_ok()) << parsed.error().message();
    const json e(entry_from_record(parsed.value(), nlohmann::ordered_json(), origin()));
    const json& p = e["provenance"];
    EXPECT_EQ(p["date"], "2026-11-23");
    EXPECT_EQ(p["fingerprint"], json({{"gpu_count", 0}}));
    EXPECT_EQ(p["fingerprint_id"], "0123456789abcdef");
    EXPECT_EQ(p["pitfall_version"], "9.8.7");
    EXPECT_EQ(p["run"], json({{"case", "cuda.s.v"},
                              {"folder", "2026-11-23T10-00-00Z"},
                              {"started", "2026-11-23T10:00:00Z"}}));
    EXPECT_FALSE(p.contains("source"));
    EXPECT_EQ(e["ran_on"], "cuda");
}

// Bless pins, by name, every check, measurement and timed series the case recorded; a run that
// no longer makes one FAILs naming it, and one the baseline does not name yet is said in a
// passing verdict until it is blessed.
TEST(Verdict, ChecksAndMeasurementsArePinnedByName) {
    const json checked =
        ok_result({{"checks",
                    {{{"name", "matches_reference"}, {"passed", true}, {"detail", "d"}},
                     {{"name", "bitwise_comparison_fails"}, {"passed", true}, {"detail", "d"}}}},
                   {"samples", {{"step_seconds", {{"unit", "s"}, {"values", {0.1, 0.1, 0.1}}}}}}});
    const json record = {{"record", "case"},          {"case", "cuda.s.v"},
                         {"verdict", "NO_BASELINE"},  {"observed", {{"status", "ok"}}},
                         {"process", json::object()}, {"result", checked}};
    const auto parsed = case_record::from_json(record);
    ASSERT_TRUE(parsed.is_ok()) << parsed.error().message();
    const json e(entry_from_record(parsed.value(), nlohmann::ordered_json(), origin()));
    EXPECT_EQ(e["records"], json({{"checks", {"bitwise_comparison_fails", "matches_reference"}},
                                  {"measurements", {"loss"}},
                                  {"samples", {"step_seconds"}}}));
    const json expected = {{"outcome", {{"status", "ok"}}}, {"records", e["records"]}};

    const verdict same = judge(seen({{"status", "ok"}}, checked), expected, "cuda");
    EXPECT_EQ(same.kind, verdict_kind::pass) << same.reason;
    EXPECT_EQ(same.reason.find("not in the baseline yet"), std::string::npos) << same.reason;

    json dropped = checked;
    dropped["checks"].erase(1);
    const verdict lost = judge(seen({{"status", "ok"}}, dropped), expected, "cuda");
    EXPECT_EQ(lost.kind, verdict_kind::fail);
    EXPECT_NE(lost.reason.find("check `bitwise_comparison_fails` no longer runs"),
              std::string::npos)
        << lost.reason;

    json unmeasured = checked;
    unmeasured["measurements"] = json::object();
    unmeasured["samples"] = json::object();
    const verdict gone = judge(seen({{"status", "ok"}}, unmeasured), expected, "cuda");
    EXPECT_EQ(gone.kind, verdict_kind::fail);
    EXPECT_NE(gone.reason.find("measurement `loss` is no longer recorded; timed series "
                               "`step_seconds` is no longer recorded"),
              std::string::npos)
        << gone.reason;

    json grown = checked;
    grown["checks"].push_back({{"name", "new_check"}, {"passed", true}, {"detail", "d"}});
    const verdict fresh = judge(seen({{"status", "ok"}}, grown), expected, "cuda");
    EXPECT_EQ(fresh.kind, verdict_kind::pass) << fresh.reason;
    EXPECT_NE(fresh.reason.find("not in the baseline yet (bless to pin): check `new_check`"),
              std::string::npos)
        << fresh.reason;

    // An entry blessed before records were pinned names none: nothing lost, nothing new said.
    const verdict old =
        judge(seen({{"status", "ok"}}, dropped), {{"outcome", {{"status", "ok"}}}}, "cuda");
    EXPECT_EQ(old.kind, verdict_kind::pass) << old.reason;
    EXPECT_EQ(old.reason.find("baseline"), std::string::npos) << old.reason;
}

// A hand-pinned ran_on longer than the proof's start stays while the proof still starts with
// it; a proof that no longer does replaces it with its own start.
TEST(Verdict, EntryFromRecordKeepsAPinnedRanOnOnlyWhileItHolds) {
    const auto entry_for = [](const std::string& proof, const std::string& pinned) {
        json result = ok_result();
        result["ran_on"] = proof;
        const auto parsed = case_record::from_json({{"record", "case"},
                                                    {"case", "cuda.s.v"},
                                                    {"verdict", "PASS"},
                                                    {"observed", {{"status", "ok"}}},
                                                    {"process", json::object()},
                                                    {"result", result}});
        EXPECT_TRUE(parsed.is_ok());
        const nlohmann::ordered_json previous = {{"outcome", {{"status", "ok"}}},
                                                 {"ran_on", pinned}};
        return json(entry_from_record(parsed.value(), previous, origin()))["ran_on"];
    };
    const std::string fallback = "cpu: silent fallback after cudaErrorNoDevice";
    EXPECT_EQ(entry_for(fallback + " (cuda_probe)", fallback), fallback);
    EXPECT_EQ(entry_for("cuda:0 NVIDIA H100", fallback), "cuda");
    EXPECT_EQ(entry_for("cpu", "cuda"), "cpu"); // no ':' at all: the whole proof
}

} // namespace

namespace {
using namespace pitfall;
using namespace pitfall::runner;
using nlohmann::json;

// The environment rule: an error the diagnosed fault explains turns a failing CUDA verdict into
// UNSUPPORTED "environment: ...", except cudaErrorInsufficientDriver, which the baselines for a
// machine without a GPU are written for.
TEST(VerdictEnvironment, TheStubIsTheMachinesFaultButNoDriverIsJudgedAsBefore) {
    const json expected = {{"outcome", {{"status", "ok"}}}};
    const json stub = {{"status", "error"},
                       {"library", "cuda_runtime"},
                       {"error", "cudaErrorStubLibrary"},
                       {"stage", "init"}};
    judge_context stub_machine;
    stub_machine.environment_fault = "the CUDA toolkit's stub libcuda.so is loaded as the driver";
    stub_machine.environment_errors = {"cudaErrorStubLibrary"};
    stub_machine.explained_errors = {"cudaErrorStubLibrary"};
    const verdict v =
        judge({stub, json(), std::nullopt, std::nullopt}, expected, "cuda", stub_machine);
    EXPECT_EQ(v.kind, verdict_kind::unsupported);
    EXPECT_EQ(v.reason.rfind("environment: the CUDA toolkit's stub", 0), 0u) << v.reason;
    EXPECT_EQ(judge({stub, json(), std::nullopt, std::nullopt}, expected, "cpu", stub_machine).kind,
              verdict_kind::fail)
        << "a CPU case is never excused by the driver";

    json no_driver = stub;
    no_driver["error"] = "cudaErrorInsufficientDriver";
    judge_context host;
    host.environment_fault = "no NVIDIA driver (libcuda.so.1 not found)";
    host.explained_errors = {"cudaErrorInsufficientDriver"};
    EXPECT_EQ(judge({no_driver, json(), std::nullopt, std::nullopt}, expected, "cuda", host).kind,
              verdict_kind::fail);
    const json expects_it = {{"outcome", no_driver}};
    const verdict pass =
        judge({no_driver, json(), std::nullopt, std::nullopt}, expects_it, "cuda", host);
    EXPECT_EQ(pass.kind, verdict_kind::pass);
    EXPECT_NE(pass.reason.find("(this machine: no NVIDIA driver"), std::string::npos)
        << pass.reason;
}
} // namespace

// An overlay holds only what one condition changes: searched first where it matches, never the
// profile a run is said to have chosen (a GPU runner checks that name).
TEST(Profiles, AnOverlayIsSearchedFirstButNeverChosen) {
    std::vector<profile> profiles(3);
    profiles[0].name = "host";
    profiles[0].match = json::object();
    profiles[1].name = "hopper";
    profiles[1].match = {{"compute_capability", "9.0"}, {"gpu_count", {{"min", 1}}}};
    profiles[1].cases["host_only_custom_op"] = {
        {"cuda.reproduce_kernel_host_data", {{"outcome", {{"status", "error"}}}}},
        {"cuda.remedy_device_op", {{"outcome", {{"status", "ok"}}}}}};
    profiles[2].name = "pageable-memory-access";
    profiles[2].overlay = true;
    profiles[2].match = {{"pageable_memory_access", true}};
    profiles[2].cases["host_only_custom_op"] = {
        {"cuda.reproduce_kernel_host_data", {{"outcome", {{"status", "ok"}}}}}};

    const json hmm = {
        {"compute_capability", "9.0"}, {"gpu_count", 1}, {"pageable_memory_access", true}};
    auto with_hmm = choose_profile(profiles, hmm, "");
    ASSERT_TRUE(with_hmm.is_ok());
    EXPECT_EQ(with_hmm->chosen->name, "hopper");
    ASSERT_EQ(with_hmm->chain.size(), 3u);
    EXPECT_EQ(with_hmm->chain[0]->name, "pageable-memory-access");
    EXPECT_NE(with_hmm->reason.find("overlays first: pageable-memory-access"), std::string::npos)
        << with_hmm->reason;
    auto [entry, from] =
        with_hmm->entry_for("host_only_custom_op", "cuda.reproduce_kernel_host_data");
    ASSERT_NE(entry, nullptr);
    EXPECT_EQ(from->name, "pageable-memory-access");
    EXPECT_EQ((*entry)["outcome"]["status"], "ok");
    // A case the overlay does not hold falls through to the GPU's own profile.
    EXPECT_EQ(with_hmm->entry_for("host_only_custom_op", "cuda.remedy_device_op").second->name,
              "hopper");

    json no_hmm = hmm;
    no_hmm["pageable_memory_access"] = false;
    auto without = choose_profile(profiles, no_hmm, "");
    EXPECT_EQ(without->chosen->name, "hopper");
    EXPECT_EQ(without->chain.size(), 2u);
    EXPECT_EQ((*without->entry_for("host_only_custom_op", "cuda.reproduce_kernel_host_data")
                    .first)["outcome"]["status"],
              "error");
    // --profile names a profile a run can be judged by: an overlay alone is not one.
    auto forced = choose_profile(profiles, hmm, "pageable-memory-access");
    ASSERT_FALSE(forced.is_ok());
    EXPECT_NE(forced.error().message().find("an overlay"), std::string::npos);
    // A machine whose probe could not read the attribute (no key) gets no overlay either.
    json unknown = hmm;
    unknown.erase("pageable_memory_access");
    EXPECT_EQ(choose_profile(profiles, unknown, "")->chain.size(), 2u);
}

// What changes behaviour on one GPU model is a fingerprint key, so profiles can match it and a
// timing baseline is compared only with a run of the same setting.
TEST(Fingerprint, BehaviourKeysComeFromTheProbeOnlyWhereItLearnedThem) {
    const json h100 = {{"libraries",
                        {{"built_with_cuda", true},
                         {"cuda",
                          {{"device_count", 1},
                           {"driver_version", 13000},
                           {"runtime_version", 13000},
                           {"devices",
                            {{{"name", "NVIDIA H100 80GB HBM3"},
                              {"compute_capability", "9.0"},
                              {"pageable_memory_access", false},
                              {"compute_mode", "exclusive_process"}}}}}},
                         {"nvml",
                          {{"driver_version", "580.65.06"},
                           {"devices", {{{"mig_mode", {{"current", 0}, {"pending", 0}}}}}}}}}}};
    const json s = fingerprint_summary(h100);
    EXPECT_EQ(s["pageable_memory_access"], false);
    EXPECT_EQ(s["compute_mode"], "exclusive_process");
    EXPECT_EQ(s["driver_branch"], 580);
    EXPECT_EQ(s["mig"], false);

    // No NVML: the branch from the kernel module, MIG from a MIG instance's device name.
    json mig = h100;
    mig["libraries"].erase("nvml");
    mig["libraries"]["driver"] = {{"kernel_module", {{"loaded", true}, {"version", "535.183.01"}}}};
    mig["libraries"]["cuda"]["devices"][0]["name"] = "NVIDIA A100-SXM4-40GB MIG 1g.5gb";
    mig["libraries"]["cuda"]["devices"][0]["pageable_memory_access"] = true;
    const json m = fingerprint_summary(mig);
    EXPECT_EQ(m["driver_branch"], 535);
    EXPECT_EQ(m["mig"], true);
    EXPECT_EQ(m["pageable_memory_access"], true);

    // Not learned (no driver here, or facts of the wrong type): absent, never guessed.
    json garbage = h100;
    garbage["libraries"]["nvml"] = {{"driver_version", "five hundred"}, {"devices", "x"}};
    garbage["libraries"]["cuda"]["devices"][0]["pageable_memory_access"] = "yes";
    garbage["libraries"]["cuda"]["devices"][0]["compute_mode"] = "unknown";
    const json g = fingerprint_summary(garbage);
    EXPECT_FALSE(g.contains("driver_branch"));
    EXPECT_FALSE(g.contains("pageable_memory_access"));
    EXPECT_FALSE(g.contains("compute_mode"));
    EXPECT_EQ(g["mig"], false); // from the device name, which is there
    const json none = fingerprint_summary({{"libraries", {{"cuda", {{"device_count", 0}}}}}});
    for (const char* key : {"driver_branch", "pageable_memory_access", "compute_mode", "mig"})
        EXPECT_FALSE(none.contains(key)) << key;
}

namespace {
json timed(double x, double y) {
    return {{"samples",
             {{"x", {{"unit", "s"}, {"values", {x, x, x}}}},
              {"y", {{"unit", "s"}, {"values", {y, y, y}}}},
              {"fraction", {{"unit", "1"}, {"values", {0.5}}}}}}};
}
} // namespace

TEST(LeastDisturbed, ChosenByTheSeriesBeingJudged) {
    const json a = timed(1.0, 2.0), b = timed(1.5, 1.9);
    const std::vector<const json*> both{&a, &b};
    // Judged on x, a ran faster; judged on y, b did: the first series by name decides neither.
    auto by_x = relative_slowness(both, {"x"});
    EXPECT_LT(by_x[0], by_x[1]);
    auto by_y = relative_slowness(both, {"y"});
    EXPECT_GT(by_y[0], by_y[1]);
    // Every timed series (not the unitless fraction): a is 1 + 2/1.9, b is 1.5 + 1.
    auto all = relative_slowness(both);
    EXPECT_NEAR(all[0], 1.0 + 2.0 / 1.9, 1e-12);
    EXPECT_NEAR(all[1], 2.5, 1e-12);
    // A result that lacks a judged series cannot be the least disturbed.
    const json none = {{"samples", json::object()}};
    auto missing = relative_slowness({&a, &none}, {"x"});
    EXPECT_TRUE(std::isinf(missing[1]));
    EXPECT_EQ(missing[0], 1.0);
    EXPECT_TRUE(std::isinf(relative_slowness({&none, &none})[0])) << "nothing to compare";
}
