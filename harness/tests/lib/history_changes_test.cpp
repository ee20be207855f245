// `pitfall history changes` over a case's trend: medians grouped by series and host, each
// group's change points named by the first run after them.
#include "history/changes.hpp"

#include <gtest/gtest.h>

#include <cmath>

namespace pitfall::history {
namespace {
using nlohmann::json;

/// A run of the case on `host` whose series "step_seconds" has `median` (and, on even runs,
/// a memory series that never moves).
trend_point run(int i, const std::string& host, double median) {
    trend_point p;
    p.at = "2026-11-28T06:" + std::string(i < 10 ? "0" : "") + std::to_string(i) + ":00Z";
    p.run_id = "run-" + host + "-" + std::to_string(i);
    p.folder = "runs/" + p.run_id;
    p.host_id = host;
    p.verdict = "PASS";
    p.series = {{"step_seconds", {{"unit", "s"}, {"median", median}}}};
    if (i % 2 == 0)
        p.series["peak_bytes"] = {{"unit", "bytes"}, {"median", 1000.0}};
    return p;
}

/// Noise of about 1% that repeats every seven runs: the same trend every time.
double wobble(int i) {
    return 1.0 + 0.01 * std::sin(1.7 * i);
}

TEST(HistoryChanges, AStepIsFoundAtItsFirstRunOnItsHostOnly) {
    std::vector<trend_point> points;
    for (int i = 0; i < 30; ++i) {
        points.push_back(run(i, "aaaa", 0.010 * wobble(i) * (i >= 18 ? 1.2 : 1.0)));
        points.push_back(run(i, "bbbb", 0.013 * wobble(i + 3))); // another machine: no step
    }
    auto found = changes_of(points);
    ASSERT_TRUE(found.is_ok()) << found.error().message();
    const series_changes* on_a = nullptr;
    const series_changes* on_b = nullptr;
    for (const auto& g : found.value())
        if (g.series == "step_seconds")
            (g.host_id == "aaaa" ? on_a : on_b) = &g;
    ASSERT_NE(on_a, nullptr);
    ASSERT_NE(on_b, nullptr);
    EXPECT_EQ(on_a->runs.size(), 30u);
    ASSERT_EQ(on_a->analysis.change_points.size(), 1u);
    const auto& cp = on_a->analysis.change_points.front();
    EXPECT_EQ(on_a->runs[static_cast<std::size_t>(cp.run_index)]->run_id, "run-aaaa-18");
    EXPECT_NEAR(cp.step, 0.2, 0.03);
    EXPECT_GT(cp.confidence, 0.99);
    EXPECT_TRUE(on_b->analysis.change_points.empty());

    const std::string table = changes_table("cpu.x.remedy", found.value());
    EXPECT_NE(table.find("from run 2026-11-28T06:18:00Z (runs/run-aaaa-18)"), std::string::npos)
        << table;
    const json doc = changes_json("cpu.x.remedy", found.value());
    EXPECT_EQ(doc["schema"], "pitfall.history-changes/1");
    bool named = false;
    for (const auto& s : doc["series"])
        for (const auto& c : s["change_points"])
            named = named || c["first_run"] == "run-aaaa-18";
    EXPECT_TRUE(named);
}

TEST(HistoryChanges, RunsWithoutTheSeriesAreLeftOutNotCountedAsValues) {
    std::vector<trend_point> points;
    points.reserve(20);
    for (int i = 0; i < 20; ++i)
        points.push_back(run(i, "aaaa", 0.01 * wobble(i)));
    auto found = changes_of(points);
    ASSERT_TRUE(found.is_ok());
    for (const auto& g : found.value()) {
        if (g.series == "peak_bytes") {
            EXPECT_EQ(g.runs.size(), 10u); // only the even runs recorded it
            EXPECT_EQ(g.unit, "bytes");
        }
        EXPECT_TRUE(g.analysis.change_points.empty()) << g.series;
    }
}

TEST(HistoryChanges, NoSeriesIsSaidNotAnError) {
    auto found = changes_of({});
    ASSERT_TRUE(found.is_ok());
    EXPECT_TRUE(found.value().empty());
    EXPECT_NE(changes_table("cpu.x.y", found.value()).find("no series"), std::string::npos);
}

} // namespace
} // namespace pitfall::history
