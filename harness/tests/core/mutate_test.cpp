// PITFALL_MUTATE's parser and what its mutants do to a result document (mutate.hpp).
#include "pitfall/detail/mutate.hpp"

#include <gtest/gtest.h>

namespace {
using namespace pitfall;
using nlohmann::json;

json result() {
    return {{"checks",
             {{{"name", "matches_reference"}, {"passed", false}, {"detail", "off by 1"}},
              {{"name", "finite"}, {"passed", true}, {"detail", "all finite"}}}},
            {"measurements", {{"max_abs_error", {{"value", 0.25}, {"unit", ""}}}}},
            {"events", {{"oom", {{"status", "error"}}}}}};
}

TEST(Mutate, ParsesOnlyTheItemsAimedAtTheCase) {
    const auto p = mutate::parse("force_pass:cpu.s.v:matches_reference,drop_check:cpu.s.w:finite,"
                                 "scale_measurement:*:max_abs_error=2",
                                 "cpu.s.v");
    ASSERT_TRUE(p.is_ok()) << p.error().message();
    EXPECT_EQ(p.value().forced_checks.count("matches_reference"), 1u);
    EXPECT_TRUE(p.value().dropped_checks.empty()); // aimed at cpu.s.w
    EXPECT_EQ(p.value().scaled_measurements.at("max_abs_error"), 2.0);
    EXPECT_EQ(p.value().items.size(), 2u);
}

TEST(Mutate, RefusesWhatItCannotRead) {
    for (const char* bad : {"force_pass", "force_pass:cpu.s.v", "force_pass::x", "flip:cpu.s.v:x",
                            "scale_measurement:cpu.s.v:x", "scale_measurement:cpu.s.v:x=0",
                            "scale_measurement:cpu.s.v:x=nan", "scale_measurement:cpu.s.v:=2",
                            "scale_measurement:cpu.s.v:x=2y"}) {
        const auto p = mutate::parse(bad, "cpu.s.v");
        ASSERT_FALSE(p.is_ok()) << bad;
        EXPECT_NE(p.error().message().find("PITFALL_MUTATE"), std::string::npos) << bad;
    }
    EXPECT_FALSE(mutate::validate("drop_check:cpu.nosuch.v:x", {"cpu.s.v"}).is_ok());
    EXPECT_FALSE(mutate::validate("drop_check:cpu.s.v:x,,", {"cpu.s.v"}).is_ok());
    EXPECT_FALSE(mutate::validate("", {"cpu.s.v"}).is_ok());
    EXPECT_TRUE(mutate::validate("drop_check:*:x,force_pass:cpu.s.v:y", {"cpu.s.v"}).is_ok());
}

TEST(Mutate, ActsOnTheRecordsAndSaysWhatItDid) {
    const auto p = mutate::parse("force_pass:*:matches_reference,drop_check:*:finite,"
                                 "scale_measurement:*:max_abs_error=4,drop_event:*:oom,"
                                 "drop_measurement:*:never_recorded",
                                 "cpu.s.v");
    ASSERT_TRUE(p.is_ok()) << p.error().message();
    json r = result();
    mutate::apply(p.value(), r);
    ASSERT_EQ(r["checks"].size(), 1u);
    EXPECT_EQ(r["checks"][0]["name"], "matches_reference");
    EXPECT_EQ(r["checks"][0]["passed"], true);
    EXPECT_DOUBLE_EQ(r["measurements"]["max_abs_error"]["value"].get<double>(), 1.0);
    EXPECT_TRUE(r["events"].empty());
    EXPECT_EQ(r["injected"],
              json({"mutant force_pass matches_reference", "mutant drop_check finite",
                    "mutant scale_measurement max_abs_error=4", "mutant drop_event oom",
                    "mutant drop_measurement never_recorded (not recorded)"}));
    // No mutant: the document as the case wrote it, with nothing marked injected.
    json untouched = result();
    mutate::apply(mutate::plan{}, untouched);
    EXPECT_EQ(untouched, result());
}

} // namespace
