// A run folder on disk: created, appended to, read back, damaged, resumed.
#include "run/run_folder.hpp"
#include "util/sha256.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace {
using namespace pitfall;
using namespace pitfall::runner;
using nlohmann::json;
namespace fs = std::filesystem;

class RunFolder : public ::testing::Test {
protected:
    void SetUp() override {
        std::string pattern = (fs::temp_directory_path() / "pitfall-run-folder-XXXXXX").string();
        ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
        m_tmp = pattern;
        m_dir = m_tmp + "/run";
    }
    void TearDown() override {
        std::error_code ec;
        fs::remove_all(m_tmp, ec);
    }

    static run_header header(const std::vector<std::string>& keys) {
        run_header h;
        h.at = "2026-11-25T10:00:00Z";
        h.fingerprint_id = "0123456789abcdef";
        h.profile = "host";
        for (const auto& k : keys)
            h.selection.push_back(case_key::parse(k).value());
        h.options.samples = 3;
        return h;
    }
    static case_record record(const std::string& key, verdict_kind v, double wall = 0.5) {
        case_record r;
        r.key = case_key::parse(key).value();
        r.verdict = v;
        r.reason = std::string("as judged: ") + to_string(v);
        r.observed = {{"status", "ok"}};
        r.process.wall_seconds = wall;
        r.process.peak_rss_bytes = 1 << 20;
        r.log = run_folder::log_name(r.key);
        return r;
    }
    /// A finished run of two cases: header, started, case, started, case.
    run_folder two_cases() {
        auto created = run_folder::create(m_dir, false);
        EXPECT_TRUE(created.is_ok()) << created.error().message();
        run_folder folder = std::move(created).value();
        EXPECT_TRUE(folder.append(header({"cpu.s.a", "cpu.s.b"})).is_ok());
        for (const char* key : {"cpu.s.a", "cpu.s.b"}) {
            EXPECT_TRUE(folder.append_event("started", case_key::parse(key).value(), "t").is_ok());
            EXPECT_TRUE(folder.append(record(key, verdict_kind::pass)).is_ok());
        }
        return folder;
    }
    std::vector<std::string> lines() const {
        std::ifstream in(m_dir + "/results.jsonl");
        std::vector<std::string> out;
        for (std::string line; std::getline(in, line);)
            out.push_back(line);
        return out;
    }
    void rewrite(const std::vector<std::string>& content, bool newline_at_end = true) const {
        std::ofstream out(m_dir + "/results.jsonl", std::ios::trunc);
        for (std::size_t i = 0; i < content.size(); ++i)
            out << content[i] << (i + 1 < content.size() || newline_at_end ? "\n" : "");
    }
    /// As rewrite, each record naming the digest of the line before it as pitfall would: for
    /// tests of what a reader makes of a line pitfall could have written.
    void rewrite_chained(std::vector<std::string> content) const {
        std::string previous;
        for (auto& line : content) {
            if (line.empty())
                continue;
            json r = json::parse(line);
            r["prev"] = previous;
            line = r.dump();
            previous = sha256_hex(line);
        }
        rewrite(content);
    }
    std::string read_error() const {
        auto log = run_folder::open(m_dir).value().read();
        EXPECT_FALSE(log.is_ok());
        return log.is_ok() ? std::string() : log.error().message();
    }

    std::string m_tmp;
    std::string m_dir;
};

TEST_F(RunFolder, WhatIsAppendedReadsBackTyped) {
    const run_folder folder = two_cases();
    EXPECT_EQ(folder.results_path(), m_dir + "/results.jsonl");
    EXPECT_EQ(folder.case_result_path(case_key::parse("cpu.s.a").value()),
              m_dir + "/cases/cpu.s.a.json");
    EXPECT_EQ(folder.case_log_path(case_key::parse("cpu.s.a").value()),
              m_dir + "/logs/cpu.s.a.log");
    EXPECT_TRUE(fs::is_directory(m_dir + "/cases"));
    EXPECT_TRUE(fs::is_directory(folder.logs_dir()));
    const auto log = folder.read();
    ASSERT_TRUE(log.is_ok()) << log.error().message();
    EXPECT_EQ(log.value().header.to_json(), header({"cpu.s.a", "cpu.s.b"}).to_json());
    ASSERT_EQ(log.value().cases.size(), 2u);
    EXPECT_EQ(log.value().cases[1].to_json(), record("cpu.s.b", verdict_kind::pass).to_json());
    EXPECT_EQ(log.value().started, (std::set<std::string>{"cpu.s.a", "cpu.s.b"}));
    EXPECT_FALSE(log.value().interrupted);
    EXPECT_EQ(log.value().resumed, 0);
    EXPECT_EQ(lines().size(), 5u); // one record a line
}

TEST_F(RunFolder, CreateRefusesAnExistingRunUnlessReplacing) {
    two_cases();
    std::ofstream(m_dir + "/notes.txt") << "not the run's";
    const auto again = run_folder::create(m_dir, false);
    ASSERT_FALSE(again.is_ok());
    EXPECT_NE(again.error().message().find("already holds a run"), std::string::npos);
    EXPECT_EQ(lines().size(), 5u);
    const auto replaced = run_folder::create(m_dir, true);
    ASSERT_TRUE(replaced.is_ok()) << replaced.error().message();
    EXPECT_TRUE(lines().empty());
    EXPECT_TRUE(fs::exists(m_dir + "/notes.txt")); // only what a run writes is removed
}

TEST_F(RunFolder, OpenWithoutResultsIsNotARunFolder) {
    fs::create_directories(m_dir);
    const auto folder = run_folder::open(m_dir);
    ASSERT_FALSE(folder.is_ok());
    EXPECT_NE(folder.error().message().find(m_dir + ": not a run folder"), std::string::npos);
    // Opened for reading, it appends nothing.
    two_cases();
    auto reader = run_folder::open(m_dir);
    EXPECT_FALSE(reader.value().append(json{{"record", "started"}}).is_ok());
}

TEST_F(RunFolder, ATruncatedLastLineIsSkipped) {
    two_cases();
    auto content = lines();
    content.back() = content.back().substr(0, content.back().size() / 2); // a kill mid-write
    rewrite(content, false);
    const auto log = run_folder::open(m_dir).value().read();
    ASSERT_TRUE(log.is_ok()) << log.error().message();
    ASSERT_EQ(log.value().cases.size(), 1u);
    EXPECT_EQ(log.value().cases[0].key.str(), "cpu.s.a");
    EXPECT_EQ(log.value().started.count("cpu.s.b"), 1u); // started, never finished
}

TEST_F(RunFolder, AMalformedMiddleLineIsBadInputNamingTheLine) {
    two_cases();
    auto content = lines();
    content[2] = "{\"record\": \"case\", \"case\": ";
    rewrite(content);
    const std::string error = read_error();
    EXPECT_NE(error.find(m_dir + "/results.jsonl: line 3 is not JSON"), std::string::npos) << error;
}

TEST_F(RunFolder, ARecordOfTheWrongShapeNamesLineAndField) {
    two_cases();
    auto content = lines();
    json rec = json::parse(content[4]);
    rec["process"]["wall_seconds"] = "fast";
    content[4] = rec.dump();
    content.emplace_back(); // a blank line at the end is no record
    rewrite_chained(content);
    std::string error = read_error();
    EXPECT_NE(error.find("results.jsonl: line 5: field 'process.wall_seconds': expected a number"),
              std::string::npos)
        << error;
    content[4] = json{{"record", "done"}}.dump();
    rewrite_chained(content);
    error = read_error();
    EXPECT_NE(error.find("line 5: field 'record': 'done' is not a record kind"), std::string::npos)
        << error;
}

TEST_F(RunFolder, NoHeaderIsNotARun) {
    two_cases();
    auto content = lines();
    content.erase(content.begin());
    rewrite_chained(content);
    EXPECT_NE(read_error().find("no run header"), std::string::npos);
}

TEST_F(RunFolder, ALinePitfallDidNotWriteIsRefusedNamingIt) {
    run_folder folder = two_cases();
    // A case that knows the folder appends a forged PASS, naming the line before it as a
    // record would; pitfall's next record still names the line it wrote last.
    auto content = lines();
    json forged = json::parse(content[2]);
    forged["prev"] = sha256_hex(content.back());
    {
        std::ofstream out(m_dir + "/results.jsonl", std::ios::app);
        out << forged.dump() << "\n";
    }
    EXPECT_TRUE(run_folder::open(m_dir).value().read().is_ok()); // the forgery fits, so far
    // pitfall's next record finds the file longer than it wrote it: written again from its own
    // copy, the forgery gone, and said.
    ASSERT_TRUE(folder.append_event("started", case_key::parse("cpu.s.a").value(), "t").is_ok());
    ASSERT_EQ(folder.restorations().size(), 1u);
    EXPECT_NE(folder.restorations()[0].find("results.jsonl changed in length"), std::string::npos)
        << folder.restorations()[0];
    EXPECT_EQ(lines().size(), content.size() + 1); // pitfall's own lines and its new record
    EXPECT_TRUE(run_folder::open(m_dir).value().read().is_ok());
    // The same forgery after pitfall's last record (pitfall gone, no seal): the chain names it.
    {
        std::ofstream out(m_dir + "/results.jsonl", std::ios::app);
        out << forged.dump() << "\n";
    }
    const std::string error = read_error();
    EXPECT_NE(error.find("results.jsonl: line 7: not a record pitfall wrote there"),
              std::string::npos)
        << error;
    // Changing a line pitfall wrote breaks the chain at the line after it.
    content = lines();
    content.pop_back(); // the forgery
    content[2].replace(content[2].find("PASS"), 4, "FAIL");
    rewrite(content);
    EXPECT_NE(read_error().find("line 4: not a record pitfall wrote there"), std::string::npos);
}

TEST_F(RunFolder, ResumeCutsACutLineOffAndAppendsOnALineOfItsOwn) {
    two_cases();
    auto content = lines();
    content.back() = content.back().substr(0, 40);
    rewrite(content, false);
    {
        auto resumed = run_folder::resume(m_dir);
        ASSERT_TRUE(resumed.is_ok()) << resumed.error().message();
        run_header later = header({"cpu.s.a", "cpu.s.b"});
        later.resumed = true;
        later.fingerprint_id = "fedcba9876543210";
        ASSERT_TRUE(resumed.value().append(later).is_ok());
        ASSERT_TRUE(resumed.value().append(record("cpu.s.b", verdict_kind::crash, 2.0)).is_ok());
    }
    EXPECT_EQ(lines().size(), 6u);
    const auto log = run_folder::open(m_dir).value().read();
    ASSERT_TRUE(log.is_ok()) << log.error().message();
    EXPECT_EQ(log.value().resumed, 1);
    EXPECT_EQ(log.value().header.fingerprint_id, "0123456789abcdef"); // the run's first header
    EXPECT_EQ(log.value().latest.fingerprint_id, "fedcba9876543210"); // the last session's
    ASSERT_EQ(log.value().cases.size(), 2u);
    EXPECT_EQ(log.value().cases[1].verdict, verdict_kind::crash);
}

TEST_F(RunFolder, TheNewestRecordOfACaseStaysWhereItFirstFinished) {
    run_folder folder = two_cases();
    ASSERT_TRUE(
        folder.append_event("interrupted", case_key::parse("cpu.s.a").value(), "t").is_ok());
    ASSERT_TRUE(folder.append(record("cpu.s.a", verdict_kind::fail, 3.0)).is_ok());
    const auto log = folder.read();
    ASSERT_TRUE(log.is_ok()) << log.error().message();
    ASSERT_EQ(log.value().cases.size(), 2u);
    EXPECT_EQ(log.value().cases[0].key.str(), "cpu.s.a");
    EXPECT_EQ(log.value().cases[0].verdict, verdict_kind::fail);
    EXPECT_EQ(log.value().find("cpu.s.a")->process.wall_seconds, 3.0);
    EXPECT_EQ(log.value().find("cpu.s.c"), nullptr);
    EXPECT_TRUE(log.value().interrupted); // not followed by a resume
}

TEST_F(RunFolder, AMissingSummaryIsNoRatiosADamagedOneIsBadInput) {
    const run_folder folder = two_cases();
    ASSERT_TRUE(folder.summary_ratios().is_ok()); // a run killed before its end has none
    EXPECT_EQ(folder.summary_ratios().value(), json::array());
    std::ofstream(folder.summary_path()) << "{\"ratios\": [{\"name\": \"r\"}]}";
    ASSERT_TRUE(folder.summary_ratios().is_ok());
    EXPECT_EQ(folder.summary_ratios().value().size(), 1u);
    std::ofstream(folder.summary_path()) << "{\"ratios\": [";
    ASSERT_FALSE(folder.summary_ratios().is_ok());
    EXPECT_NE(folder.summary_ratios().error().message().find(folder.summary_path()),
              std::string::npos);
    std::ofstream(folder.summary_path()) << "{\"ratios\": [{\"failing\": \"no\"}]}";
    ASSERT_FALSE(folder.summary_ratios().is_ok());
    EXPECT_NE(folder.summary_ratios().error().message().find("/ratios/0/failing"),
              std::string::npos);
}

} // namespace
