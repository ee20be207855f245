// Resource limits ("limits" in scenario.json, setrlimit in the child) and containment (the
// case token, the sweep of what a case leaves behind).
#include "pitfall/detail/manifest.hpp"
#include "pitfall/detail/process.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <fstream>
#include <thread>
#include <unistd.h>

namespace {
using namespace pitfall;

std::string with_limits(const std::string& limits) {
    return R"({"name": "demo", "summary": "s", "failure_class": "f", "backends": ["cpu"],
               "variants": [{"name": "v", "kind": "probe"}], "limits": )" +
           limits + "}";
}

std::string limits_error(const std::string& limits) {
    auto m = parse_manifest(with_limits(limits), "f.json");
    return m.is_ok() ? "" : m.error().message();
}

TEST(Limits, ParsedFromTheManifest) {
    auto m = parse_manifest(
        with_limits(R"({"address_space": "8G", "cpu_seconds": 600, "file_size": 4096})"), "f.json");
    ASSERT_TRUE(m.is_ok()) << m.error().message();
    EXPECT_EQ(m->limits.address_space, std::uint64_t{8} << 30);
    EXPECT_EQ(m->limits.cpu_seconds, 600u);
    EXPECT_EQ(m->limits.file_size, 4096u);
    auto none = parse_manifest(with_limits("{}"), "f.json");
    ASSERT_TRUE(none.is_ok());
    EXPECT_FALSE(none->limits.address_space || none->limits.cpu_seconds || none->limits.file_size);
}

TEST(Limits, BadValuesNameTheField) {
    EXPECT_EQ(limits_error("[]"), "f.json: field 'limits': expected an object of {address_space, "
                                  "cpu_seconds, file_size}");
    EXPECT_NE(limits_error(R"({"stack": 1})").find("field 'limits.stack': unknown field"),
              std::string::npos);
    for (const char* bad :
         {R"("8Q")", "0", "-1", "1.5", R"("")", "null", "true", R"("99999999999999999999G")"})
        EXPECT_NE(limits_error(std::string(R"({"address_space": )") + bad + "}")
                      .find("field 'limits.address_space': expected a positive number of bytes"),
                  std::string::npos)
            << bad;
    EXPECT_NE(limits_error(R"({"cpu_seconds": "10"})")
                  .find("field 'limits.cpu_seconds': expected a positive whole number"),
              std::string::npos);
}

TEST(Limits, FileSizeLimitEndsAWriterWithSigxfsz) {
    process_request r;
    const std::string file =
        std::string(::testing::TempDir()) + "/fsize" + std::to_string(getpid());
    r.argv = {"/bin/sh", "-c", "head -c 2000000 /dev/zero > " + file};
    r.limits.file_size_bytes = 1000000;
    const auto p = run_process(r);
    ::unlink(file.c_str());
    ASSERT_TRUE(p.started) << p.start_error;
    // The shell's child (head) dies of SIGXFSZ; the shell reports 128 + SIGXFSZ.
    EXPECT_EQ(p.exit_code, 128 + SIGXFSZ);
}

TEST(Limits, AddressSpaceLimitFailsAnAllocation) {
    process_request r;
    // A shell asked for 1 GiB of a variable under a 256 MiB address space: it cannot.
    r.argv = {"/bin/sh", "-c", "ulimit -v"};
    r.output_path = std::string(::testing::TempDir()) + "/as" + std::to_string(getpid());
    r.limits.address_space_bytes = 256u << 20;
    const auto p = run_process(r);
    ASSERT_TRUE(p.started);
    EXPECT_EQ(p.exit_code, 0);
    EXPECT_EQ(read_tail(r.output_path, 100), std::to_string(256 * 1024) + "\n"); // KiB
}

TEST(Containment, MarkedSetsidGrandchildIsEndedWithItsCase) {
    const std::string token = "test" + std::to_string(getpid()) + "/cpu.demo.v";
    process_request r;
    // The case leaves a grandchild in a session of its own (out of its process group) and exits.
    r.argv = {"/bin/sh", "-c", "setsid sleep 1000 & sleep 0.2; exit 0"};
    r.case_token = token;
    const auto p = run_process(r);
    ASSERT_TRUE(p.started);
    EXPECT_EQ(p.exit_code, 0);
    EXPECT_EQ(marked_processes(token), std::vector<int>{});
}

TEST(Containment, MarkedProcessesFindsTheToken) {
    const std::string token = "scan" + std::to_string(getpid());
    process_request r;
    r.argv = {"/bin/sh", "-c", "exec sleep 1000"};
    r.env_set[case_token_env] = token + "/x"; // marked, but not as a contained case
    r.timeout_seconds = 0.5;
    std::vector<int> seen;
    std::thread look([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        seen = marked_processes(token + "/");
    });
    const auto p = run_process(r);
    look.join();
    EXPECT_TRUE(p.timed_out);
    EXPECT_EQ(seen.size(), 1u);
    EXPECT_EQ(marked_processes(token + "/"), std::vector<int>{});
}

TEST(Containment, UnknownModeIsRefused) {
    const auto held = contain_cases("jail");
    ASSERT_FALSE(held.is_ok());
    EXPECT_NE(held.error().message().find("expected auto, cgroup or subreaper"), std::string::npos);
}

} // namespace
