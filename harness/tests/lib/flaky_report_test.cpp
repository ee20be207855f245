// The flaky cases of a finishing run (`pitfall run --history`): counted from a real results
// database with the run's own verdicts as its newest run, written to flaky.json, read back
// tolerantly (a damaged flaky.json is said in the report, never a failed report), and rendered
// in every report format.
#include "history/flaky.hpp"
#include "history/ingest.hpp"
#include "history/run_flaky.hpp"
#include "report/report.hpp"
#include "run/run_folder.hpp"

#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace {
using namespace pitfall;
using namespace pitfall::runner;
namespace fs = std::filesystem;
using nlohmann::json;

const char* const flaky_key = "cpu.demo.reproduce";
const char* const steady_key = "cpu.demo.remedy";

class FlakyRun : public ::testing::Test {
protected:
    void SetUp() override {
        std::string pattern = (fs::temp_directory_path() / "pitfall-flaky-XXXXXX").string();
        ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
        m_tmp = pattern;
        m_db = m_tmp + "/history.sqlite";
    }
    void TearDown() override {
        std::error_code ec;
        fs::remove_all(m_tmp, ec);
    }

    static case_record record(const std::string& key, verdict_kind verdict) {
        case_record r;
        r.key = case_key::parse(key).value();
        r.verdict = verdict;
        r.reason = verdict == verdict_kind::pass ? "as expected" : "behaviour changed";
        r.observed = {{"status", "ok"}};
        r.log = run_folder::log_name(r.key);
        return r;
    }
    /// A run folder started `at`: flaky_key with `verdict`, steady_key passing.
    std::string make_run(const std::string& name, const std::string& at, verdict_kind verdict,
                         const std::string& revision = "abc123") {
        std::string dir = m_tmp + "/" + name;
        auto created = run_folder::create(dir, false);
        EXPECT_TRUE(created.is_ok()) << created.error().message();
        run_header h;
        h.at = at;
        h.fingerprint_id = "0123456789abcdef";
        h.profile = "host";
        h.build = {{"build_type", "Release"}, {"git_revision", revision}};
        h.selection = {case_key::parse(flaky_key).value(), case_key::parse(steady_key).value()};
        EXPECT_TRUE(created->append(h).is_ok());
        EXPECT_TRUE(created->append(record(flaky_key, verdict)).is_ok());
        EXPECT_TRUE(created->append(record(steady_key, verdict_kind::pass)).is_ok());
        return dir;
    }
    void ingest(const std::string& dir) {
        auto db = history::history_db::open(m_db, true);
        ASSERT_TRUE(db.is_ok()) << db.error().message();
        auto rows = history::read_run_rows(dir);
        ASSERT_TRUE(rows.is_ok()) << rows.error().message();
        ASSERT_TRUE(history::store_run(db.value(), rows.value()).is_ok());
    }
    json flaky_file(const std::string& dir) {
        std::ifstream in(dir + "/flaky.json");
        return json::parse(in, nullptr, false);
    }

    std::string m_tmp, m_db;
};

TEST_F(FlakyRun, TheRunsOwnVerdictCountsAndItMatchesHistoryFlakyOnceRecorded) {
    ingest(make_run("a", "2026-11-01T10:00:00Z", verdict_kind::pass));
    ingest(make_run("b", "2026-11-01T11:00:00Z", verdict_kind::pass));
    ingest(make_run("other-build", "2026-11-01T11:30:00Z", verdict_kind::fail, "def456"));
    const std::string now = make_run("c", "2026-11-01T12:00:00Z", verdict_kind::fail);

    history::write_run_flaky(m_db, now, 10);
    const json doc = flaky_file(now);
    ASSERT_EQ(doc.value("schema", ""), "pitfall.run-flaky/1") << doc.dump();
    EXPECT_EQ(doc["release_after"], 10);
    EXPECT_EQ(doc["build"], "abc123");
    ASSERT_EQ(doc["cases"].size(), 1U) << doc.dump(); // the other build's FAIL is not counted
    const json& c = doc["cases"][0];
    EXPECT_EQ(c["case"], flaky_key);
    EXPECT_EQ(c["runs"], 3);
    EXPECT_EQ(c["verdicts"], json({{"FAIL", 1}, {"PASS", 2}}));
    ASSERT_EQ(c["flips"].size(), 1U);
    EXPECT_EQ(c["flips"][0]["folder"], fs::absolute(now).lexically_normal().string());
    EXPECT_EQ(c["flips"][0]["to"], "FAIL");
    EXPECT_EQ(c["trailing_passes"], 0);

    // Once recorded, `pitfall history flaky` says the same of this build.
    ingest(now);
    auto db = history::history_db::open(m_db, false);
    ASSERT_TRUE(db.is_ok());
    auto all = history::flaky_cases(db.value(), 10);
    ASSERT_TRUE(all.is_ok());
    ASSERT_EQ(all->size(), 1U);
    EXPECT_EQ(all->front().runs, 3U);
    EXPECT_EQ(all->front().flips.size(), 1U);

    // Writing again for the recorded run does not count it twice.
    history::write_run_flaky(m_db, now, 10);
    EXPECT_EQ(flaky_file(now)["cases"][0]["runs"], 3);
}

TEST_F(FlakyRun, ReleasedAfterNPassingRunsAndNoDatabaseNoFile) {
    ingest(make_run("a", "2026-11-01T10:00:00Z", verdict_kind::fail));
    ingest(make_run("b", "2026-11-01T11:00:00Z", verdict_kind::pass));
    const std::string now = make_run("c", "2026-11-01T12:00:00Z", verdict_kind::pass);
    history::write_run_flaky(m_db, now, 3);
    EXPECT_EQ(flaky_file(now)["cases"].size(), 1U); // 2 of 3 passing runs in a row
    history::write_run_flaky(m_db, now, 2);
    EXPECT_EQ(flaky_file(now)["cases"], json::array()); // released

    const std::string elsewhere = make_run("d", "2026-11-01T13:00:00Z", verdict_kind::fail);
    history::write_run_flaky(m_tmp + "/no-such.sqlite", elsewhere, 10);
    EXPECT_FALSE(fs::exists(elsewhere + "/flaky.json"));
    // A database that is not one: a warning, no file, and a stale flaky.json is gone.
    std::ofstream(elsewhere + "/flaky.json") << R"({"schema": "pitfall.run-flaky/1"})";
    std::ofstream(m_tmp + "/noise.sqlite") << std::string(4096, 'x');
    history::write_run_flaky(m_tmp + "/noise.sqlite", elsewhere, 10);
    EXPECT_FALSE(fs::exists(elsewhere + "/flaky.json"));
}

TEST_F(FlakyRun, EveryReportNamesTheFlakyCaseWithItsHistory) {
    ingest(make_run("a", "2026-11-01T10:00:00Z", verdict_kind::pass));
    const std::string now = make_run("b", "2026-11-01T11:00:00Z", verdict_kind::fail);
    history::write_run_flaky(m_db, now, 10);
    auto run = load_run(now);
    ASSERT_TRUE(run.is_ok()) << run.error().message();
    ASSERT_TRUE(run->flaky_problem.empty()) << run->flaky_problem;

    const json report = render_json(run.value());
    ASSERT_TRUE(report.contains("flaky"));
    EXPECT_EQ(report["flaky"]["db"], m_db);
    EXPECT_EQ(report["flaky"]["cases"][0]["case"], flaky_key);
    EXPECT_EQ(report["flaky"]["cases"][0]["flips_total"], 1);

    const std::string md = render_markdown(run.value());
    EXPECT_NE(md.find("### Flaky cases (per the history database)"), std::string::npos) << md;
    EXPECT_NE(md.find("- `cpu.demo.reproduce` (here FAIL): FAIL x1, PASS x1 in 2 runs, 0 "
                      "passing in a row; 1 flip(s), latest:"),
              std::string::npos)
        << md;
    EXPECT_NE(md.find("  - 2026-11-01T11:00:00Z PASS -> FAIL in `"), std::string::npos) << md;
    EXPECT_EQ(md.find("`cpu.demo.remedy` (here"), std::string::npos) << md;

    const std::string html = render_html(run.value());
    EXPECT_NE(html.find("<section id=\"flaky\"><h2>Flaky cases (per the history database)"),
              std::string::npos);
    EXPECT_NE(html.find("2026-11-01T11:00:00Z PASS &rarr; FAIL"), std::string::npos) << html;

    const std::string junit = render_junit(run.value());
    EXPECT_NE(junit.find("<property name=\"flaky\" value=\"cpu.demo.reproduce\"/>"),
              std::string::npos)
        << junit;
    EXPECT_NE(junit.find("flaky per the history database: FAIL x1, PASS x1 in 2 runs; latest "
                         "flip 2026-11-01T11:00:00Z PASS -&gt; FAIL"),
              std::string::npos)
        << junit;
    EXPECT_EQ(flaky_summary(report["flaky"]["cases"][0]),
              "FAIL x1, PASS x1 in 2 runs; latest flip 2026-11-01T11:00:00Z PASS -> FAIL");
}

TEST_F(FlakyRun, WithoutFlakyJsonNoReportHasTheSection) {
    const std::string now = make_run("a", "2026-11-01T10:00:00Z", verdict_kind::pass);
    auto run = load_run(now);
    ASSERT_TRUE(run.is_ok());
    EXPECT_FALSE(render_json(run.value()).contains("flaky"));
    EXPECT_EQ(render_markdown(run.value()).find("Flaky"), std::string::npos);
    EXPECT_EQ(render_html(run.value()).find("id=\"flaky\""), std::string::npos);
    EXPECT_EQ(render_junit(run.value()).find("flaky"), std::string::npos);
}

TEST_F(FlakyRun, ADamagedFlakyJsonIsSaidNeverAFailedReport) {
    const std::string now = make_run("a", "2026-11-01T10:00:00Z", verdict_kind::fail);
    const std::string path = now + "/flaky.json";
    const json good_case = {{"case", flaky_key},         {"runs", 2},
                            {"verdicts", {{"PASS", 1}}}, {"flips", json::array()},
                            {"flips_total", 0},          {"trailing_passes", 0}};
    auto with_case = [&](const json& c) {
        return json({{"schema", "pitfall.run-flaky/1"},
                     {"db", "h.sqlite"},
                     {"release_after", 10},
                     {"cases", {c}}})
            .dump();
    };
    json huge_flips = good_case;
    huge_flips["flips"] = json::array();
    for (int i = 0; i < 500; ++i)
        huge_flips["flips"].push_back(
            {{"at", std::to_string(i)}, {"folder", "f"}, {"from", "PASS"}, {"to", "FAIL"}});
    json wrong_runs = good_case;
    wrong_runs["runs"] = "two";
    json negative = good_case;
    negative["trailing_passes"] = -1;
    json bad_flip = good_case;
    bad_flip["flips"] = {{{"at", 1}}};
    const std::pair<std::string, std::string> damaged[] = {
        {"{\"schema\": \"pitfall.run-flaky/1\", \"cases\": [", "line"},
        {"[]", "schema: not pitfall.run-flaky/1"},
        {with_case(wrong_runs), "cases[0].runs: not a whole number"},
        {with_case(negative), "cases[0].trailing_passes: not a whole number"},
        {with_case(bad_flip), "cases[0].flips[0].at: not a string"},
        {with_case("text"), "cases[0]: not an object"},
        {std::string(100000, '['), "deep"},
        {"\xff\xfe", ""}};
    for (const auto& [text, why] : damaged) {
        std::ofstream(path, std::ios::trunc) << text;
        auto run = load_run(now);
        ASSERT_TRUE(run.is_ok()) << run.error().message();
        EXPECT_FALSE(run->flaky_problem.empty()) << text.substr(0, 80);
        EXPECT_NE(run->flaky_problem.find(why), std::string::npos) << run->flaky_problem;
        EXPECT_TRUE(run->flaky.is_null());
        EXPECT_EQ(render_json(run.value())["flaky"]["problem"], run->flaky_problem);
        EXPECT_NE(render_markdown(run.value()).find("flaky.json unreadable: "), std::string::npos);
        EXPECT_NE(render_html(run.value()).find("flaky.json unreadable: "), std::string::npos);
        EXPECT_NE(render_junit(run.value()).find("name=\"flaky.problem\""), std::string::npos);
    }
    // Many flips: the latest are kept, and the total says how many there were.
    std::ofstream(path, std::ios::trunc) << with_case(huge_flips);
    auto run = load_run(now);
    ASSERT_TRUE(run.is_ok());
    ASSERT_TRUE(run->flaky_problem.empty()) << run->flaky_problem;
    const json& kept = run->flaky["cases"][0];
    EXPECT_EQ(kept["flips"].size(), history::run_flaky_flips_kept);
    EXPECT_EQ(kept["flips"].back()["at"], "499");
    EXPECT_EQ(kept["flips_total"], 500);

    // A FIFO is refused at once, not waited on.
    fs::remove(path);
    ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
    auto fifo = load_run(now);
    ASSERT_TRUE(fifo.is_ok());
    EXPECT_NE(fifo->flaky_problem.find("is a FIFO"), std::string::npos) << fifo->flaky_problem;
}

TEST_F(FlakyRun, MarkupFromTheDatabaseStaysText) {
    const std::string now = make_run("a", "2026-11-01T10:00:00Z", verdict_kind::fail);
    const json doc = {
        {"schema", "pitfall.run-flaky/1"},
        {"db", "<i>db</i>"},
        {"release_after", 10},
        {"cases",
         {{{"case", "<script>alert(1)</script>"},
           {"runs", 2},
           {"verdicts", {{"<b>FAIL</b>", 1}, {"PASS", 1}}},
           {"flips", {{{"at", "now"}, {"folder", "</td>x"}, {"from", "PASS"}, {"to", "<b>"}}}},
           {"flips_total", 1},
           {"trailing_passes", 0}}}}};
    std::ofstream(now + "/flaky.json") << doc.dump();
    auto run = load_run(now);
    ASSERT_TRUE(run.is_ok());
    ASSERT_TRUE(run->flaky_problem.empty()) << run->flaky_problem;
    const std::string html = render_html(run.value());
    const std::string section = html.substr(html.find("<section id=\"flaky\">"));
    EXPECT_EQ(section.find("<script>"), std::string::npos);
    EXPECT_EQ(section.find("<b>"), std::string::npos);
    EXPECT_EQ(section.find("<i>"), std::string::npos);
    EXPECT_NE(section.find("&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos);
    EXPECT_NE(section.find("&lt;/td&gt;x"), std::string::npos);
    EXPECT_EQ(render_junit(run.value()).find("<script>"), std::string::npos);
}

} // namespace
