// The typed records of a run: round trips, and wrong types refused naming the field.
#include "model/model.hpp"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace {
using namespace pitfall;
using namespace pitfall::runner;
using nlohmann::json;

/// The message of a status_or that must be an error.
template <class T> std::string error_of(const status_or<T>& s) {
    EXPECT_FALSE(s.is_ok());
    return s.is_ok() ? std::string() : s.error().message();
}

json full_record() {
    return {{"record", "case"},
            {"case", "cpu.float64_inputs.reproduce"},
            {"test", "pitfall.cpu.float64_inputs.reproduce"},
            {"scenario", "float64_inputs"},
            {"backend", "cpu"},
            {"variant", "reproduce"},
            {"kind", "reproduce"},
            {"labels", {"cpu", "float64_inputs"}},
            {"verdict", "NUMERIC_MISMATCH"},
            {"failing", true},
            {"reason", "check agrees failed"},
            {"observed", {{"status", "ok"}}},
            {"process",
             {{"exit_code", 0},
              {"signal", nullptr},
              {"timed_out", false},
              {"wall_seconds", 1.25},
              {"peak_rss_bytes", 123456789012},
              {"threads", 1}}},
            {"result", {{"schema", "pitfall.result/1"}, {"samples", json::object()}}},
            {"timings", json::object()},
            {"attempts", json::array()},
            {"baseline", {{"profile", "host"}, {"entry", {{"outcome", {{"status", "ok"}}}}}}},
            {"log", "logs/cpu.float64_inputs.reproduce.log"},
            {"output_tail", "last words\n"},
            {"finished_at", "2026-11-25T10:00:00Z"}};
}

json full_header() {
    return {{"record", "run"},
            {"schema", "pitfall.run/1"},
            {"at", "2026-11-25T09:59:00Z"},
            {"pitfall_version", "0.1.0"},
            {"argv", {"pitfall", "run"}},
            {"index", "/b/pitfall-index.json"},
            {"build", {{"cuda", false}}},
            {"fingerprint", {{"host", {{"cpu_model", "x"}}}}},
            {"fingerprint_summary", {{"gpu_count", 0}}},
            {"fingerprint_id", "0123456789abcdef"},
            {"profile", {{"name", "host"}, {"reason", "matches {}"}}},
            {"selection", {"cpu.float64_inputs.reproduce", "cuda.float64_inputs.remedy"}},
            {"options",
             {{"samples", 9},
              {"timeout_scale", 2.0},
              {"timing_floor", 0.1},
              {"remeasure_pause_seconds", 2.0},
              {"jobs", 1},
              {"timed_in_parallel", false},
              {"full", false},
              {"timings", "record"},
              {"timing_correction", "bh"},
              {"timing_level", 0.01}}}};
}

TEST(VerdictTable, EachVerdictOnceWithItsNameAndWhetherItFails) {
    std::set<std::string> names;
    for (const auto& v : verdict_table()) {
        EXPECT_TRUE(names.insert(v.name).second) << v.name;
        EXPECT_EQ(verdict_named(v.name), v.kind);
        EXPECT_STREQ(to_string(v.kind), v.name);
        EXPECT_NE(std::string(v.label), "");
    }
    EXPECT_EQ(names.size(), 10u);
    std::set<std::string> failing;
    for (const auto& v : verdict_table())
        if (is_failing(v.kind))
            failing.insert(v.name);
    EXPECT_EQ(failing, (std::set<std::string>{"FAIL", "NUMERIC_MISMATCH", "MEM_REGRESSION",
                                              "PERF_REGRESSION", "CRASH", "TIMEOUT"}));
    EXPECT_EQ(info(verdict_kind::unsupported).severity, verdict_severity::skip);
    EXPECT_EQ(info(verdict_kind::no_baseline).severity, verdict_severity::warning);
    EXPECT_EQ(info(verdict_kind::crash).severity, verdict_severity::error);
    EXPECT_FALSE(verdict_named("PASSED"));
    EXPECT_FALSE(verdict_named("NOT_RUN"));
}

TEST(VerdictTable, ExportedAsReportJsonCarriesIt) {
    const json table = verdicts_json();
    ASSERT_EQ(table.size(), verdict_table().size());
    EXPECT_EQ(table[0]["name"], "PASS");
    for (const auto& v : table) {
        EXPECT_EQ(v.size(), 4u) << v.dump();
        EXPECT_EQ(v["failing"], is_failing(*verdict_named(v["name"])));
    }
}

TEST(CaseKey, RoundTripsThroughItsString) {
    const auto key = case_key::parse("cuda.dtype_casting.remedy_loss_scaling");
    ASSERT_TRUE(key.is_ok()) << key.error().message();
    EXPECT_EQ(key.value().backend, "cuda");
    EXPECT_EQ(key.value().scenario, "dtype_casting");
    EXPECT_EQ(key.value().variant, "remedy_loss_scaling");
    EXPECT_EQ(key.value().str(), "cuda.dtype_casting.remedy_loss_scaling");
    EXPECT_EQ(key.value().test_name(), "pitfall.cuda.dtype_casting.remedy_loss_scaling");
    EXPECT_EQ(key.value().entry_key(), "cuda.remedy_loss_scaling");
}

TEST(CaseKey, RefusesWhatIsNotThreeNames) {
    for (const char* bad : {"", "cpu", "cpu.reproduce", "cpu..reproduce", "CPU.s.v", "cpu.s.v.w",
                            "cpu.s.v ", "cpu.s-x.v"})
        EXPECT_NE(error_of(case_key::parse(bad)).find("is not a case key"), std::string::npos)
            << bad;
}

TEST(RunHeader, RoundTrips) {
    const auto h = run_header::from_json(full_header());
    ASSERT_TRUE(h.is_ok()) << h.error().message();
    EXPECT_FALSE(h.value().resumed);
    EXPECT_EQ(h.value().profile, "host");
    ASSERT_EQ(h.value().selection.size(), 2u);
    EXPECT_EQ(h.value().selection[1].str(), "cuda.float64_inputs.remedy");
    EXPECT_EQ(h.value().options.samples, 9);
    EXPECT_EQ(h.value().options.timeout_scale, 2.0);
    EXPECT_FALSE(h.value().options.judge_times);
    EXPECT_EQ(h.value().options.correction, "bh");
    EXPECT_EQ(h.value().options.timing_level, 0.01);
    EXPECT_EQ(h.value().to_json(), full_header());
}

// A run started before the header recorded how it judges times ran with the defaults.
TEST(RunHeader, OlderHeaderJudgesTimesAsTheDefaults) {
    json j = full_header();
    for (const char* key : {"timings", "timing_correction", "timing_level"})
        j["options"].erase(key);
    const auto h = run_header::from_json(j);
    ASSERT_TRUE(h.is_ok()) << h.error().message();
    EXPECT_TRUE(h.value().options.judge_times);
    EXPECT_EQ(h.value().options.correction, "holm");
    EXPECT_EQ(h.value().options.timing_level, 0.05);
}

TEST(RunHeader, NoProfileIsNull) {
    json j = full_header();
    j["profile"]["name"] = nullptr;
    j["options"]["samples"] = nullptr;
    j["record"] = "resumed";
    const auto h = run_header::from_json(j);
    ASSERT_TRUE(h.is_ok()) << h.error().message();
    EXPECT_TRUE(h.value().resumed);
    EXPECT_FALSE(h.value().profile);
    EXPECT_FALSE(h.value().options.samples);
    EXPECT_EQ(h.value().to_json(), j);
}

TEST(RunHeader, WrongTypesNameTheField) {
    const std::pair<const char*, json> cases[] = {
        {"field 'at'", {{"at", 5}}},
        {"field 'argv'", {{"argv", {"pitfall", 3}}}},
        {"field 'fingerprint_summary'", {{"fingerprint_summary", "gpu"}}},
        {"field 'profile.name'", {{"profile", {{"name", 1}}}}},
        {"field 'options.samples'", {{"options", {{"samples", "9"}}}}},
        {"field 'options.timeout_scale'", {{"options", {{"timeout_scale", "2"}}}}},
        {"field 'options.timings'", {{"options", {{"timings", "judged"}}}}},
        {"field 'options.timings'", {{"options", {{"timings", 1}}}}},
        {"field 'options.timing_correction'", {{"options", {{"timing_correction", "bonferroni"}}}}},
        {"field 'options.timing_level'", {{"options", {{"timing_level", 1.5}}}}},
        {"field 'options.timing_level'", {{"options", {{"timing_level", "0.05"}}}}},
        {"field 'selection[1]'", {{"selection", {"cpu.s.v", "cpu.s"}}}},
        {"field 'schema'", {{"schema", "pitfall.run/2"}}},
    };
    for (const auto& [field, patch] : cases) {
        json j = full_header();
        j.update(patch);
        EXPECT_NE(error_of(run_header::from_json(j)).find(field), std::string::npos) << field;
    }
    EXPECT_NE(error_of(run_header::from_json(full_record())).find("is not a run header"),
              std::string::npos);
}

TEST(CaseRecord, APeakRssMethodIsCaseOrWait4) {
    json record = full_record();
    record["process"]["peak_rss_method"] = "case";
    const auto ok = case_record::from_json(record);
    ASSERT_TRUE(ok.is_ok()) << ok.error().message();
    EXPECT_EQ(ok.value().process.peak_rss_method, "case");
    EXPECT_EQ(ok.value().to_json()["process"]["peak_rss_method"], "case");
    for (const json& bad : {json("VmHWM"), json(3), json::array()}) {
        record["process"]["peak_rss_method"] = bad;
        const auto refused = case_record::from_json(record);
        ASSERT_FALSE(refused.is_ok()) << bad.dump();
        EXPECT_NE(refused.error().message().find("peak_rss_method"), std::string::npos)
            << refused.error().message();
    }
}

TEST(CaseRecord, RoundTrips) {
    const auto r = case_record::from_json(full_record());
    ASSERT_TRUE(r.is_ok()) << r.error().message();
    const case_record& c = r.value();
    EXPECT_EQ(c.key.str(), "cpu.float64_inputs.reproduce");
    EXPECT_EQ(c.verdict, verdict_kind::numeric_mismatch);
    EXPECT_TRUE(c.failing());
    EXPECT_EQ(c.process.peak_rss_bytes, 123456789012);
    EXPECT_EQ(c.process.threads, 1);
    EXPECT_FALSE(c.process.signal);
    EXPECT_EQ(c.baseline_profile, "host");
    EXPECT_EQ(c.to_json(), full_record());
}

TEST(CaseRecord, AFewFieldsAreEnoughAndFailingFollowsTheTable) {
    // What a hand-made record holds (the matrix tests' minimal run folders).
    const json minimal = {{"record", "case"},
                          {"case", "cuda.version_mismatch.runtime_vs_driver"},
                          {"verdict", "FAIL"},
                          {"failing", false},
                          {"process", {{"wall_seconds", 0.1}}}};
    const auto r = case_record::from_json(minimal);
    ASSERT_TRUE(r.is_ok()) << r.error().message();
    EXPECT_TRUE(r.value().failing()); // the table decides, not the line
    const json back = r.value().to_json();
    EXPECT_EQ(back["scenario"], "version_mismatch");
    EXPECT_EQ(back["failing"], true);
    EXPECT_TRUE(back["result"].is_null());
    EXPECT_TRUE(back["process"]["peak_rss_bytes"].is_null());
}

TEST(CaseRecord, WrongTypesNameTheField) {
    const std::pair<const char*, json> cases[] = {
        {"field 'verdict': 'PASSED' is not a verdict", {{"verdict", "PASSED"}}},
        {"field 'verdict'", {{"verdict", 1}}},
        {"field 'failing'", {{"failing", "yes"}}},
        {"field 'labels'", {{"labels", {"cpu", 2}}}},
        {"field 'observed'", {{"observed", "ok"}}},
        {"field 'process.wall_seconds'", {{"process", {{"wall_seconds", "1.2"}}}}},
        {"field 'process.exit_code'", {{"process", {{"exit_code", 1.5}}}}},
        {"field 'process.signal'", {{"process", {{"signal", 11}}}}},
        {"field 'process.threads': expected a thread count", {{"process", {{"threads", 0}}}}},
        {"field 'process.threads': expected a thread count",
         {{"process", {{"threads", 4294967297LL}}}}},
        {"field 'process.threads'", {{"process", {{"threads", "1"}}}}},
        {"field 'process'", {{"process", 3}}},
        {"field 'result'", {{"result", "none"}}},
        {"field 'attempts'", {{"attempts", json::object()}}},
        {"field 'baseline.profile'", {{"baseline", {{"profile", 3}}}}},
        {"field 'baseline.entry'", {{"baseline", {{"entry", "x"}}}}},
        {"field 'case'", {{"case", "cpu.float64_inputs"}}},
        {"field 'scenario': 'dtype_casting' disagrees", {{"scenario", "dtype_casting"}}},
        {"field 'record'", {{"record", 7}}},
    };
    for (const auto& [field, patch] : cases) {
        json j = full_record();
        j.update(patch);
        EXPECT_NE(error_of(case_record::from_json(j)).find(field), std::string::npos)
            << field << " in: " << error_of(case_record::from_json(j));
    }
    json no_verdict = full_record();
    no_verdict.erase("verdict");
    EXPECT_NE(error_of(case_record::from_json(no_verdict)).find("field 'verdict': missing"),
              std::string::npos);
}

} // namespace
