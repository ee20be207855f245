// The CUDA backend's host half, on whatever this machine has: without a driver every call must
// fail by name (and leave the tracker as it was); with a GPU the same calls must work.
#include "pitfall/backend.hpp"

#include <gtest/gtest.h>

#include <cstdint>

namespace {
using namespace pitfall;

TEST(CudaBackend, AllocationFollowsTheProbe) {
    const status probe = cuda_probe();
    auto& tracker = memory_tracker::for_backend(backend_kind::cuda);
    const auto before_failed = tracker.failed();
    auto buf = cuda_backend::allocate<float>(1024);
    if (!probe.is_ok()) {
        ASSERT_FALSE(buf.is_ok());
        EXPECT_EQ(buf.error().lib(), library::cuda_runtime);
        EXPECT_EQ(buf.error().name(), probe.name()); // e.g. cudaErrorInsufficientDriver
        EXPECT_EQ(buf.error().where(), stage::alloc);
        EXPECT_EQ(tracker.current(), 0u) << "a failed cudaMalloc must give its bytes back";
        EXPECT_EQ(tracker.failed(), before_failed + 1);
        return;
    }
    ASSERT_TRUE(buf.is_ok()) << buf.error().describe();
    std::vector<float> h(1024, 3.f), back(1024, 0.f);
    ASSERT_TRUE(cuda_backend::copy_to_device(buf.value(), h.data(), h.size()).is_ok());
    ASSERT_TRUE(cuda_backend::copy_to_host(back.data(), buf.value(), back.size()).is_ok());
    EXPECT_EQ(back, h);
}

TEST(CudaBackend, CublasFailsByNameWithoutADevice) {
    const status probe = cuda_probe();
    auto handle = cuda_backend::blas_handle();
    if (!probe.is_ok()) {
        ASSERT_FALSE(handle.is_ok());
        EXPECT_EQ(handle.error().lib(), library::cublas);
        EXPECT_EQ(handle.error().name().rfind("CUBLAS_STATUS_", 0), 0u) << handle.error().name();
    } else {
        EXPECT_TRUE(handle.is_ok()) << handle.error().describe();
    }
}

TEST(CudaBackend, AnOverflowingSizeIsOutOfMemoryBeforeAnyCudaCall) {
    auto buf = cuda_backend::allocate<double>(SIZE_MAX / 4);
    ASSERT_FALSE(buf.is_ok());
    EXPECT_EQ(buf.error().name(), "cudaErrorMemoryAllocation");
    EXPECT_NE(buf.error().message().find("overflows"), std::string::npos);
}

TEST(StatusOr, AnOkStatusIsNotAValue) {
    const status_or<int> s = status::ok();
    EXPECT_FALSE(s.is_ok());
    EXPECT_EQ(s.error().name(), "ok_without_value");
}
} // namespace
