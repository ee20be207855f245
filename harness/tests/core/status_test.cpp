#include "pitfall/backend.hpp"
#include "pitfall/memory.hpp"
#include "pitfall/status.hpp"

#include <gtest/gtest.h>

#include <cerrno>

namespace {
using namespace pitfall;

TEST(Status, OkByDefault) {
    EXPECT_TRUE(status().is_ok());
    EXPECT_EQ(status::ok().describe(), "ok");
}

TEST(Status, ErrorCarriesNameLibraryStageAndPlace) {
    const status s = status::error(library::cuda_runtime, "cudaErrorMemoryAllocation",
                                   "out of memory", stage::alloc, false, "x.cu", 12);
    EXPECT_FALSE(s.is_ok());
    EXPECT_EQ(
        s.describe(),
        "cudaErrorMemoryAllocation (cuda_runtime, alloc, not sticky) at x.cu:12: out of memory");
    EXPECT_EQ(s.at_stage(stage::copy).where(), stage::copy);
}

TEST(Status, UnsupportedBecauseKeepsTheCause) {
    const status cause =
        status::error(library::cuda_runtime, "cudaErrorInsufficientDriver", "m", stage::init);
    const status s = status::unsupported_because(cause, "no driver");
    EXPECT_TRUE(s.is_unsupported());
    EXPECT_FALSE(s.is_ok());
    EXPECT_EQ(s.name(), "cudaErrorInsufficientDriver");
    EXPECT_EQ(s.message(), "no driver");
}

TEST(Status, StickyListMatchesCudaFacts) {
    for (const char* sticky :
         {"cudaErrorIllegalAddress", "cudaErrorLaunchFailure", "cudaErrorAssert",
          "cudaErrorMisalignedAddress", "cudaErrorHardwareStackError"})
        EXPECT_TRUE(is_sticky_cuda_error(sticky)) << sticky;
    for (const char* not_sticky :
         {"cudaErrorMemoryAllocation", "cudaErrorInsufficientDriver", "cudaErrorNoDevice",
          "cudaErrorInvalidDevice", "cudaErrorNoKernelImageForDevice"})
        EXPECT_FALSE(is_sticky_cuda_error(not_sticky)) << not_sticky;
}

TEST(Status, NamesRoundTrip) {
    for (auto lib : {library::cuda_runtime, library::cublas, library::cudnn, library::host})
        EXPECT_EQ(library_from_string(to_string(lib)), lib);
    for (auto st :
         {stage::alloc, stage::copy, stage::launch, stage::synchronize, stage::library_call})
        EXPECT_EQ(stage_from_string(to_string(st)), st);
    EXPECT_FALSE(stage_from_string("later").has_value());
}

status_or<int> half(int x) {
    if (x % 2 != 0)
        return PITFALL_HOST_ERROR(stage::compute, host_error::exception,
                                  "cannot halve " + std::to_string(x));
    return x / 2;
}
status quarter(int x, int& out) {
    PITFALL_ASSIGN_OR_RETURN(const int h, half(x));
    PITFALL_ASSIGN_OR_RETURN(out, half(h));
    return status::ok();
}

TEST(Status, MacrosPropagateTheFirstError) {
    int out = 0;
    EXPECT_TRUE(quarter(8, out).is_ok());
    EXPECT_EQ(out, 2);
    const status s = quarter(6, out);
    EXPECT_EQ(s.name(), "std::exception");
    EXPECT_EQ(s.lib(), library::host);
    EXPECT_EQ(s.message(), "cannot halve 3");
}

TEST(Status, HostAndPitfallNamesAreClosedSets) {
    // Every enumerator has a name of its own, and the name is listed for its library.
    for (auto code : {host_error::bad_alloc, host_error::write_failed, host_error::child_killed,
                      host_error::no_batch_fits, host_error::library_not_loaded}) {
        const status s = status::error(code, "m", stage::init);
        EXPECT_EQ(s.lib(), library::host);
        EXPECT_NE(s.name(), "unknown");
        EXPECT_TRUE(is_listed_error_name(library::host, s.name())) << s.name();
    }
    EXPECT_EQ(status::error(pitfall_error::bad_parameter, "m", stage::init).name(),
              "bad_parameter");
    EXPECT_TRUE(is_listed_error_name(library::pitfall, "cudnn_loaded_minor_older"));
    // A name outside the sets never becomes an outcome name: it is kept in the message.
    const status unlisted = status::error(library::host, "made_up_name", "what", stage::init);
    EXPECT_EQ(unlisted.lib(), library::pitfall);
    EXPECT_EQ(unlisted.name(), "unlisted_error_name");
    EXPECT_EQ(unlisted.message(), "made_up_name: what");
    EXPECT_FALSE(is_listed_error_name(library::pitfall, "made_up_name"));
    // Vendor libraries name their own errors.
    EXPECT_TRUE(is_listed_error_name(library::cuda_runtime, "cudaErrorNoDevice"));
    EXPECT_EQ(status::error(library::cudnn, "CUDNN_STATUS_NOT_SUPPORTED", "", stage::init).name(),
              "CUDNN_STATUS_NOT_SUPPORTED");
}

TEST(Status, ErrnoNames) {
    const status s = status::from_errno(EINVAL, "sched_setaffinity", stage::init);
    EXPECT_EQ(s.lib(), library::host);
    EXPECT_EQ(s.name(), "EINVAL");
    EXPECT_NE(s.message().find("sched_setaffinity: "), std::string::npos);
    EXPECT_TRUE(is_listed_error_name(library::host, "ENOENT"));
    EXPECT_FALSE(is_listed_error_name(library::host, "Enot_an_errno"));
}

TEST(ByteSize, ParsesSuffixesAndRejectsJunk) {
    EXPECT_EQ(parse_byte_size("1024"), 1024u);
    EXPECT_EQ(parse_byte_size("512M"), 512ull << 20);
    EXPECT_EQ(parse_byte_size("2GiB"), 2ull << 30);
    EXPECT_EQ(parse_byte_size("1t"), 1ull << 40);
    EXPECT_FALSE(parse_byte_size("").has_value());
    EXPECT_FALSE(parse_byte_size("12 apples").has_value());
    EXPECT_FALSE(parse_byte_size("-1").has_value());
    EXPECT_FALSE(parse_byte_size("99999999999999999999").has_value());
    EXPECT_FALSE(parse_byte_size("17179869184T").has_value()); // overflows 64 bits
}

TEST(MemoryTracker, BudgetGivesEachBackendItsOwnOutOfMemoryError) {
    memory_tracker cuda(backend_kind::cuda, 1000);
    EXPECT_TRUE(cuda.reserve(600).is_ok());
    const status over = cuda.reserve(600);
    EXPECT_EQ(over.name(), "cudaErrorMemoryAllocation");
    EXPECT_EQ(over.lib(), library::cuda_runtime);
    EXPECT_EQ(over.where(), stage::alloc);
    EXPECT_FALSE(over.sticky());
    cuda.release(600);
    EXPECT_TRUE(cuda.reserve(1000).is_ok());
    EXPECT_EQ(cuda.peak(), 1000u);
    EXPECT_EQ(cuda.failed(), 1u);

    memory_tracker cpu(backend_kind::cpu, 10);
    EXPECT_EQ(cpu.reserve(11).name(), "std::bad_alloc");
    EXPECT_EQ(cpu.reserve(11).lib(), library::host);
}

TEST(MemoryTracker, UnlimitedWithoutABudget) {
    memory_tracker t(backend_kind::cuda, std::nullopt);
    EXPECT_TRUE(t.reserve(1ull << 50).is_ok());
    EXPECT_EQ(t.current(), 1ull << 50);
}

TEST(CpuBackend, SameFunctorAndGemmAgreeWithAHandReference) {
    auto a = cpu_backend::allocate<double>(4);
    ASSERT_TRUE(a.is_ok());
    const double h_a[4] = {1, 2, 3, 4}; // column-major 2x2: [[1,3],[2,4]]
    ASSERT_TRUE(cpu_backend::copy_to_device(a.value(), h_a, 4).is_ok());
    auto c = cpu_backend::allocate<double>(4);
    ASSERT_TRUE(c.is_ok());
    ASSERT_TRUE(cpu_backend::gemm(transpose::no, transpose::no, 2, 2, 2, 1.0, a->data(), 2,
                                  a->data(), 2, 0.0, c->data(), 2)
                    .is_ok());
    double h_c[4];
    ASSERT_TRUE(cpu_backend::copy_to_host(h_c, c.value(), 4).is_ok());
    // [[1,3],[2,4]]^2 = [[7,15],[10,22]] -> column-major 7,10,15,22
    EXPECT_DOUBLE_EQ(h_c[0], 7);
    EXPECT_DOUBLE_EQ(h_c[1], 10);
    EXPECT_DOUBLE_EQ(h_c[2], 15);
    EXPECT_DOUBLE_EQ(h_c[3], 22);
}
} // namespace
