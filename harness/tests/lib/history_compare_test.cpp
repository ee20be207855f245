// `pitfall history compare` (the upgrade report) and `pitfall history flaky` over a database
// filled through the library's own ingest API (store_run) in a temporary folder.
#include "history/compare.hpp"
#include "history/flaky.hpp"
#include "history/ingest.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <sstream>

namespace pitfall::history {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;

/// A case of a run: its verdict and, where given, the median of "epoch_seconds" (and of its
/// normalised twin "epoch_seconds/host_blas").
case_row case_of(const std::string& key, const std::string& verdict, double seconds = 0,
                 double normalised = 0) {
    case_row c;
    c.case_key = key;
    c.verdict = verdict;
    c.status = "ok";
    c.peak_rss_bytes = 10'000'000;
    if (seconds > 0)
        c.series["epoch_seconds"] = {{"unit", "s"}, {"median", seconds}, {"samples", {seconds}}};
    if (normalised > 0)
        c.series["epoch_seconds/host_blas"] = {{"unit", ""}, {"median", normalised}};
    return c;
}

class HistoryCompare : public ::testing::Test {
protected:
    void SetUp() override {
        std::string pattern = (fs::temp_directory_path() / "pitfall-compare-XXXXXX").string();
        ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
        m_dir = pattern;
        auto db = history_db::open(m_dir + "/history.sqlite", true);
        ASSERT_TRUE(db.is_ok()) << db.error().message();
        m_db = std::make_unique<history_db>(std::move(db.value()));
    }
    void TearDown() override {
        m_db.reset();
        std::error_code ec;
        fs::remove_all(m_dir, ec);
    }

    /// Stores a run started at minute `minute` with `blas_core`, fingerprint and build given.
    void add_run(int minute, const std::string& blas_core, std::vector<case_row> cases,
                 const std::string& fingerprint = "fp-1", const std::string& revision = "r1") {
        run_rows r;
        r.id = "run-" + std::to_string(minute);
        r.at = "2026-11-28T07:" + std::string(minute < 10 ? "0" : "") + std::to_string(minute) +
               ":00Z";
        r.folder = "/runs/" + r.id;
        r.host_id = "host-1";
        r.fingerprint_id = fingerprint;
        r.fingerprint_summary = {{"blas_core", blas_core}, {"cpu_threads", 2}};
        r.git_revision = revision;
        r.build = {{"git_revision", revision}};
        r.pitfall_version = "1.0";
        r.content = r.id;
        r.cases = std::move(cases);
        auto stored = store_run(*m_db, r);
        ASSERT_TRUE(stored.is_ok()) << stored.error().message();
    }

    std::string m_dir;
    std::unique_ptr<history_db> m_db;
};

TEST(HistoryCompareRule, BOutsideAsRangeWidenedByTenPercentDiffers) {
    EXPECT_FALSE(outside_widened_range(1.099, 0.8, 1.0));
    EXPECT_TRUE(outside_widened_range(1.101, 0.8, 1.0));
    EXPECT_FALSE(outside_widened_range(0.721, 0.8, 1.0));
    EXPECT_TRUE(outside_widened_range(0.719, 0.8, 1.0));
}

TEST(HistoryCompareRule, ByNeedsAKeyAndTwoValues) {
    EXPECT_TRUE(parse_compare_by("blas_core=Haswell,Zen").is_ok());
    for (const char* bad : {"blas_core", "blas_core=Haswell", "=a,b"}) {
        auto by = parse_compare_by(bad);
        ASSERT_FALSE(by.is_ok()) << bad;
        EXPECT_EQ(by.error().name(), to_string(pitfall_error::bad_input));
        EXPECT_NE(by.error().message().find("KEY=A,B"), std::string::npos);
    }
}

TEST_F(HistoryCompare, ListsWhatDiffersWithTheRunsBehindEachSide) {
    // A: three Haswell runs; B: two Sandybridge runs.
    for (int i = 0; i < 3; ++i)
        add_run(i, "Haswell",
                {case_of("cpu.slow.remedy", "PASS", 1.0 + 0.02 * i),
                 case_of("cpu.broke.remedy", "PASS"), case_of("cpu.same.remedy", "PASS", 2.0),
                 case_of("cpu.gone.remedy", "PASS")});
    for (int i = 3; i < 5; ++i)
        add_run(i, "Sandybridge",
                {case_of("cpu.slow.remedy", "PASS", 1.3), case_of("cpu.broke.remedy", "FAIL"),
                 case_of("cpu.same.remedy", "PASS", 2.1), case_of("cpu.new.remedy", "PASS")});
    auto report = compare_runs(*m_db, parse_compare_by("blas_core=Haswell,Sandybridge").value());
    ASSERT_TRUE(report.is_ok()) << report.error().message();
    const compare_report& r = report.value();
    EXPECT_EQ(r.runs_a, 3u);
    EXPECT_EQ(r.runs_b, 2u);
    ASSERT_EQ(r.differing.size(), 2u);
    EXPECT_EQ(r.differing[0].case_key, "cpu.broke.remedy");
    EXPECT_TRUE(r.differing[0].verdict_differs);
    EXPECT_EQ(r.differing[0].verdicts_b.at("FAIL"), 2u);
    const case_comparison& slow = r.differing[1];
    EXPECT_EQ(slow.case_key, "cpu.slow.remedy");
    EXPECT_FALSE(slow.verdict_differs);
    ASSERT_EQ(slow.quantities.size(), 1u);
    EXPECT_EQ(slow.quantities[0].basis, "absolute");
    EXPECT_EQ(slow.quantities[0].runs_a, 3u);
    EXPECT_DOUBLE_EQ(slow.quantities[0].median_a, 1.02);
    EXPECT_DOUBLE_EQ(slow.quantities[0].median_b, 1.3);
    ASSERT_EQ(r.only_a.size(), 1u);
    EXPECT_EQ(r.only_a[0].case_key, "cpu.gone.remedy");
    ASSERT_EQ(r.only_b.size(), 1u);
    EXPECT_EQ(r.only_b[0].case_key, "cpu.new.remedy");
    EXPECT_EQ(r.same, 1u); // cpu.same: 2.1 s lies inside 2.0 s widened by 10%

    const std::string md = compare_markdown("h.sqlite", r);
    EXPECT_NE(md.find("| cpu.slow.remedy | 3 | 2 | time epoch_seconds (absolute) | 1.02 s"),
              std::string::npos)
        << md;
    EXPECT_NE(md.find("| cpu.broke.remedy | 3 | 2 | verdict | PASS x3 | FAIL x2 |"),
              std::string::npos)
        << md;
    const json doc = compare_json("h.sqlite", r);
    EXPECT_EQ(doc["schema"], "pitfall.history-compare/1");
    EXPECT_EQ(doc["only_b"][0]["case"], "cpu.new.remedy");
}

TEST_F(HistoryCompare, TheNormalisedTwinDecidesWhereBothSidesHoldIt) {
    // Three builds on one machine (revisions r1..r3): r2's runs were slower (absolute 1.5x) but
    // so was their control, so the code did not change; r3's code did (1.6x normalised).
    add_run(0, "Haswell", {case_of("cpu.x.remedy", "PASS", 1.0, 0.50)}, "fp-1", "r1");
    add_run(1, "Haswell", {case_of("cpu.x.remedy", "PASS", 1.5, 0.51)}, "fp-1", "r2");
    add_run(2, "Haswell", {case_of("cpu.x.remedy", "PASS", 1.0, 0.80)}, "fp-1", "r3");
    auto same = compare_runs(*m_db, parse_compare_by("git_revision=r1,r2").value());
    ASSERT_TRUE(same.is_ok()) << same.error().message();
    EXPECT_TRUE(same->differing.empty());
    EXPECT_EQ(same->same, 1u);
    auto slower = compare_runs(*m_db, parse_compare_by("git_revision=r1,r3").value());
    ASSERT_TRUE(slower.is_ok());
    ASSERT_EQ(slower->differing.size(), 1u);
    ASSERT_EQ(slower->differing[0].quantities.size(), 1u);
    EXPECT_EQ(slower->differing[0].quantities[0].name, "epoch_seconds/host_blas");
    EXPECT_EQ(slower->differing[0].quantities[0].basis, "normalised");
    EXPECT_EQ(slower->differing[0].quantities[0].what, "time"); // a time over a time
}

TEST_F(HistoryCompare, AcrossBlasKernelTypesTheHostBlasTwinStandsAside) {
    // host_blas is an OpenBLAS SGEMM: under another kernel type it is another program, and
    // dividing by it would hide part of the change compared. The absolute series decides.
    add_run(0, "Haswell", {case_of("cpu.x.remedy", "PASS", 1.0, 0.50)});
    add_run(1, "Sandybridge", {case_of("cpu.x.remedy", "PASS", 1.5, 0.51)});
    for (const char* key : {"blas_core=Haswell,Sandybridge"}) {
        auto r = compare_runs(*m_db, parse_compare_by(key).value());
        ASSERT_TRUE(r.is_ok()) << r.error().message();
        ASSERT_EQ(r->differing.size(), 1u) << key;
        ASSERT_EQ(r->differing[0].quantities.size(), 1u);
        EXPECT_EQ(r->differing[0].quantities[0].name, "epoch_seconds");
        EXPECT_EQ(r->differing[0].quantities[0].basis, "absolute");
    }
}

TEST_F(HistoryCompare, UnknownKeysAndValuesNameWhatTheDatabaseHas) {
    add_run(0, "Haswell", {case_of("cpu.x.remedy", "PASS")});
    add_run(1, "Sandy,bridge", {case_of("cpu.x.remedy", "PASS")});
    auto key = compare_runs(*m_db, parse_compare_by("blas_cor=Haswell,Zen").value());
    ASSERT_FALSE(key.is_ok());
    EXPECT_EQ(key.error().name(), to_string(pitfall_error::bad_input));
    EXPECT_NE(key.error().message().find("did you mean 'blas_core'"), std::string::npos)
        << key.error().message();
    auto value = compare_runs(*m_db, parse_compare_by("blas_core=Haswel,Zen").value());
    ASSERT_FALSE(value.is_ok());
    EXPECT_NE(value.error().message().find("the database has 'Haswell', 'Sandy,bridge'"),
              std::string::npos)
        << value.error().message();
    // A value with a comma is split where both halves are values the database has.
    auto comma = compare_runs(*m_db, parse_compare_by("blas_core=Haswell,Sandy,bridge").value());
    ASSERT_TRUE(comma.is_ok()) << comma.error().message();
    EXPECT_EQ(comma->by.value_b, "Sandy,bridge");
    // Numbers compare as their JSON text; the run's own columns are keys too.
    EXPECT_FALSE(compare_runs(*m_db, parse_compare_by("cpu_threads=2,3").value()).is_ok());
    auto values = comparable_values(*m_db);
    ASSERT_TRUE(values.is_ok());
    EXPECT_EQ(values->at("cpu_threads"), std::vector<std::string>{"2"});
    EXPECT_EQ(values->at("git_revision"), std::vector<std::string>{"r1"});
}

TEST_F(HistoryCompare, TheHtmlPageEscapesTextAndLoadsNothing) {
    add_run(0, "<script>alert(1)</script>", {case_of("cpu.x.remedy", "PASS")});
    add_run(1, "Zen", {case_of("cpu.x.remedy", "FAIL")});
    auto r =
        compare_runs(*m_db, parse_compare_by("blas_core=<script>alert(1)</script>,Zen").value());
    ASSERT_TRUE(r.is_ok()) << r.error().message();
    const std::string page = compare_html("h.sqlite", r.value());
    EXPECT_EQ(page.find("<script"), std::string::npos);
    EXPECT_NE(page.find("&lt;script&gt;"), std::string::npos);
    for (const char* outside : {"src=", "href=", "@import", "url("})
        EXPECT_EQ(page.find(outside), std::string::npos) << outside;
    const std::string md = compare_markdown("h.sqlite", r.value());
    EXPECT_EQ(md.find("<script"), std::string::npos);
}

TEST_F(HistoryCompare, FlakyCasesFlipWithinOneBuildAndFingerprint) {
    const char* verdicts[] = {"PASS", "FAIL", "PASS", "PASS", "PASS"};
    for (int i = 0; i < 5; ++i)
        add_run(i, "Haswell",
                {case_of("cpu.flaky.remedy", verdicts[i]), case_of("cpu.steady.remedy", "FAIL")});
    // Another build and another fingerprint: a verdict changed there is not flakiness.
    add_run(5, "Haswell", {case_of("cpu.steady.remedy", "PASS")}, "fp-1", "r2");
    add_run(6, "Haswell", {case_of("cpu.steady.remedy", "PASS")}, "fp-2", "r1");
    auto found = flaky_cases(*m_db, 3);
    ASSERT_TRUE(found.is_ok()) << found.error().message();
    ASSERT_EQ(found->size(), 1u);
    const flaky_case& c = found->front();
    EXPECT_EQ(c.case_key, "cpu.flaky.remedy");
    EXPECT_EQ(c.runs, 5u);
    EXPECT_EQ(c.verdicts.at("PASS"), 4u);
    EXPECT_EQ(c.verdicts.at("FAIL"), 1u);
    ASSERT_EQ(c.flips.size(), 2u);
    EXPECT_EQ(c.flips[0].folder, "/runs/run-1");
    EXPECT_EQ(c.flips[0].to, "FAIL");
    EXPECT_EQ(c.flips[1].folder, "/runs/run-2");
    EXPECT_EQ(c.trailing_passes, 3u);
    EXPECT_TRUE(c.released); // its last 3 runs passed
    auto strict = flaky_cases(*m_db, 4);
    ASSERT_TRUE(strict.is_ok());
    EXPECT_FALSE(strict->front().released);

    std::ostringstream out;
    ASSERT_TRUE(write_flaky(*m_db, 10, false, out).is_ok());
    EXPECT_NE(out.str().find("cpu.flaky.remedy: 5 runs, FAIL x1, PASS x4; not released"),
              std::string::npos)
        << out.str();
    EXPECT_FALSE(write_flaky(*m_db, 0, true, out).is_ok());
}

} // namespace
} // namespace pitfall::history
