// A case's peak resident set is the case's own: the same wherever it sits in a run and however
// large pitfall has grown, and it moves by what the case itself allocates. Real child processes
// of the fixture scenario, started the way `pitfall run` starts a case.
#include "run/case_memory.hpp"

#include "pitfall/detail/json_file.hpp"
#include "pitfall/detail/process.hpp"
#include "pitfall/detail/resident_memory.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <unistd.h>
#include <vector>

#ifndef PITFALL_FIXTURE_PROGRAM
#error "PITFALL_FIXTURE_PROGRAM: the fixture scenario's program (harness/tests/CMakeLists.txt)"
#endif

namespace {
using namespace pitfall;
using nlohmann::json;

struct measured {
    long long wait4_bytes = 0; ///< ru_maxrss, as the harness measured a case before
    runner::case_peak_rss own; ///< what the harness records now
};

/// The fixture's `ok` case (cpu), holding `resident_mib` MiB more, in a process of its own.
measured run_fixture(int resident_mib) {
    const std::string dir = ::testing::TempDir();
    const std::string result = dir + "/case-memory-" + std::to_string(::getpid()) + ".json";
    ::unlink(result.c_str());
    process_request r;
    r.argv = {PITFALL_FIXTURE_PROGRAM, "--backend", "cpu", "--variant", "ok", "--out", result};
    r.env_set["PITFALL_FIXTURE_RESIDENT_MIB"] = std::to_string(resident_mib);
    r.output_path = dir + "/case-memory-" + std::to_string(::getpid()) + ".log";
    r.timeout_seconds = 60;
    const process_outcome p = run_process(r);
    EXPECT_TRUE(p.started) << p.start_error;
    EXPECT_EQ(p.exit_code, 0) << read_tail(r.output_path, 2000);
    std::ifstream in(result);
    std::stringstream text;
    text << in.rdbuf();
    const json doc = json::parse(text.str(), nullptr, false);
    EXPECT_TRUE(doc.is_object()) << result;
    return {p.peak_rss_bytes, runner::peak_rss_of_case(p.peak_rss_bytes, doc)};
}

/// Within 2% or one page of each other, whichever is larger.
::testing::AssertionResult agree(std::int64_t a, std::int64_t b) {
    const double allowed = std::max(4096.0, 0.02 * double(std::max(a, b)));
    if (std::abs(double(a - b)) <= allowed)
        return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure()
           << a << " and " << b << " differ by " << (a - b) << " bytes, more than " << allowed;
}

TEST(CaseMemory, APeakIsTheCasesOwnWhereverItSitsAndHoweverLargePitfallIs) {
    const measured first = run_fixture(0);
    const measured bigger = run_fixture(64);
    // pitfall grown by 200 MB before it forks the same case again: every page written.
    std::vector<char> ballast(std::size_t{200} << 20);
    for (std::size_t i = 0; i < ballast.size(); i += 4096)
        ballast[i] = 1;
    const measured last = run_fixture(0);
    ASSERT_TRUE(first.own.bytes && bigger.own.bytes && last.own.bytes);
    EXPECT_EQ(first.own.method, runner::rss_method_case);
    EXPECT_EQ(last.own.method, runner::rss_method_case);
    std::cout << "case's own peak: first " << *first.own.bytes << ", 64 MiB more "
              << *bigger.own.bytes << ", after pitfall grew 200 MB " << *last.own.bytes
              << "; wait4's: " << first.wait4_bytes << ", " << bigger.wait4_bytes << ", "
              << last.wait4_bytes << '\n';

    // The figure recorded: the same first and last.
    EXPECT_TRUE(agree(*first.own.bytes, *last.own.bytes));
    // What a case really allocates shows in full: 64 MiB more reads 64 MiB more (under
    // AddressSanitizer too: 64.08 MiB in the asan preset, the shadow of a plain allocation
    // not resident).
    const double grown = double(*bigger.own.bytes - *first.own.bytes);
    EXPECT_NEAR(grown, double(64 << 20), 0.02 * double(64 << 20));

    // The previous measurement, wait4's ru_maxrss, counts the image of pitfall the case was
    // forked from: it moved with pitfall's 200 MB, and is kept only as a fallback.
    EXPECT_GT(last.wait4_bytes - first.wait4_bytes, 150LL << 20)
        << "wait4 no longer counts the parent's image: the fallback can be judged again";
    EXPECT_FALSE(agree(first.wait4_bytes, last.wait4_bytes));
}

TEST(CaseMemory, WithoutABelievableReportTheFigureIsWait4sAndSaysSo) {
    const long long wait4 = 50 << 20;
    const auto none = runner::peak_rss_of_case(wait4, json());
    EXPECT_EQ(none.method, runner::rss_method_wait4);
    EXPECT_EQ(none.bytes, wait4);
    // A report well above what the kernel counted for the whole process (past 1 MiB or 2%),
    // zero, negative, not a number, huge, or of the wrong type: not the case's figure.
    for (const json& bad : {json(wait4 + (1 << 20) + 1), json(0), json(-5), json("12"), json(1e300),
                            json(18446744073709551615ULL), json(nullptr), json::array()}) {
        const auto peak =
            runner::peak_rss_of_case(wait4, {{"resident_memory", {{"peak_rss_bytes", bad}}}});
        EXPECT_EQ(peak.method, runner::rss_method_wait4) << bad.dump();
        EXPECT_EQ(peak.bytes, wait4) << bad.dump();
    }
    EXPECT_EQ(runner::peak_rss_of_case(wait4, {{"resident_memory", "x"}}).method,
              runner::rss_method_wait4);
    // A few pages above wait4's (the kernel's per-CPU counters, read at two moments): the
    // case's own figure still.
    const auto close =
        runner::peak_rss_of_case(wait4, {{"resident_memory", {{"peak_rss_bytes", wait4 + 8192}}}});
    EXPECT_EQ(close.method, runner::rss_method_case);
    EXPECT_EQ(close.bytes, wait4 + 8192);
    EXPECT_FALSE(runner::peak_rss_of_case(0, json()).bytes.has_value());
    // The case's children count where they peaked higher than the case itself.
    const auto with_children = runner::peak_rss_of_case(
        wait4, {{"resident_memory",
                 {{"peak_rss_bytes", 10 << 20}, {"children_peak_rss_bytes", 30 << 20}}}});
    EXPECT_EQ(with_children.method, runner::rss_method_case);
    EXPECT_EQ(with_children.bytes, 30 << 20);
}

TEST(CaseMemory, VmHwmIsReadFromAStatusTextAndNothingElse) {
    EXPECT_EQ(
        detail::vm_hwm_bytes("Name:\tx\nVmPeak:\t  100 kB\nVmHWM:\t    7424 kB\nVmRSS: 1 kB\n"),
        7424 * 1024);
    EXPECT_FALSE(detail::vm_hwm_bytes("VmRSS:\t 12 kB\n"));
    EXPECT_FALSE(detail::vm_hwm_bytes("VmHWM:\t 12 MB\n"));
    EXPECT_FALSE(detail::vm_hwm_bytes("VmHWM:\t kB\n"));
    EXPECT_FALSE(detail::vm_hwm_bytes("VmHWM:\t 99999999999999999999999 kB\n"));
    EXPECT_FALSE(detail::vm_hwm_bytes(std::string("VmHWM:\t 1\xff kB\n")));
    EXPECT_FALSE(detail::vm_hwm_bytes(""));
    const auto own = detail::read_own_peak_rss();
    ASSERT_TRUE(own.self_bytes);
    EXPECT_GT(*own.self_bytes, 0);
}
} // namespace
