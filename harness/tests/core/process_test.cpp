#include "pitfall/detail/process.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <unistd.h>

namespace {
using namespace pitfall;

// Alive and not a zombie waiting for its (re)parent to reap it.
bool alive(int pid) {
    if (::kill(pid, 0) != 0)
        return false;
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string pid_field, comm, state;
    stat >> pid_field >> comm >> state;
    return state != "Z";
}

std::string temp_path(const char* name) {
    return std::string(::testing::TempDir()) + "/" + name + std::to_string(::getpid());
}

TEST(Process, ExitCodeAndOutput) {
    process_request r;
    r.argv = {"/bin/sh", "-c", "echo hello; echo oops >&2; exit 3"};
    r.output_path = temp_path("out");
    const auto p = run_process(r);
    ASSERT_TRUE(p.started);
    EXPECT_EQ(p.exit_code, 3);
    EXPECT_FALSE(p.signal.has_value());
    EXPECT_EQ(read_tail(r.output_path, 100), "hello\noops\n");
    EXPECT_EQ(read_tail(r.output_path, 5), "oops\n");
}

TEST(Process, SignalIsRecordedByName) {
    process_request r;
    r.argv = {"/bin/sh", "-c", "kill -SEGV $$"};
    const auto p = run_process(r);
    ASSERT_TRUE(p.signal.has_value());
    EXPECT_EQ(signal_name(*p.signal), "SIGSEGV");
    EXPECT_GT(p.peak_rss_bytes, 0);
}

TEST(Process, TimeoutEndsTheWholeGroup) {
    process_request r;
    const std::string pidfile = temp_path("pid");
    // A grandchild that ignores TERM: only the KILL to the group ends it.
    r.argv = {"/bin/sh", "-c", "(trap '' TERM; sleep 60) & echo $! > " + pidfile + "; wait"};
    r.timeout_seconds = 0.5;
    r.kill_grace_seconds = 0.3;
    const auto started = std::chrono::steady_clock::now();
    const auto p = run_process(r);
    const double took =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    EXPECT_TRUE(p.timed_out);
    EXPECT_LT(took, 5.0);
    std::ifstream in(pidfile);
    int grandchild = 0;
    in >> grandchild;
    ASSERT_GT(grandchild, 0);
    usleep(100000);
    EXPECT_FALSE(alive(grandchild)) << "grandchild " << grandchild << " survived";
}

TEST(Process, MissingProgramIsAStartError) {
    process_request r;
    r.argv = {"/nonexistent/program"};
    const auto p = run_process(r);
    EXPECT_FALSE(p.started);
    EXPECT_NE(p.start_error.find("/nonexistent/program"), std::string::npos);
}

TEST(Process, EnvironmentIsPassedWithOverrides) {
    process_request r;
    r.argv = {"/bin/sh", "-c", "test \"$PITFALL_TEST_VALUE\" = yes"};
    r.env_set["PITFALL_TEST_VALUE"] = "yes";
    EXPECT_EQ(run_process(r).exit_code, 0);
}
} // namespace
