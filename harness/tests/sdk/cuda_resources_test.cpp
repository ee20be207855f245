// pitfall/cuda/*.hpp, the owners of CUDA objects, on whatever this machine has: each is released
// once and moved, never copied; without a driver creating one fails by the runtime's error name
// at its documented stage, with a GPU it works.
#include "pitfall/cuda/graph.hpp"
#include "pitfall/cuda/handle.hpp"
#include "pitfall/cuda/library_image.hpp"
#include "pitfall/cuda/pinned_buffer.hpp"
#include "pitfall/cuda/status.hpp"
#include "pitfall/cuda/stream.hpp"

#include <gtest/gtest.h>

#include <utility>

namespace {
using namespace pitfall;

int released_count = 0;
int last_released = 0;
struct count_release {
    void operator()(int handle) const noexcept {
        ++released_count;
        last_released = handle;
    }
};
using counted = cuda::unique_handle<int, count_release>;

TEST(CudaHandle, ReleasedOnceAndMoved) {
    released_count = 0;
    {
        counted none;
        EXPECT_FALSE(none);
    }
    EXPECT_EQ(released_count, 0) << "nothing owned, nothing released";
    {
        counted a(7);
        counted b(std::move(a));
        EXPECT_FALSE(a); // NOLINT(bugprone-use-after-move): moved-from is empty by contract
        EXPECT_EQ(b.get(), 7);
        counted c(9);
        c = std::move(b); // 9 goes now, 7 with c
        EXPECT_EQ(released_count, 1);
        EXPECT_EQ(last_released, 9);
    }
    EXPECT_EQ(released_count, 2);
    EXPECT_EQ(last_released, 7);
}

TEST(CudaStatus, OkForSuccessNamedOtherwise) {
    EXPECT_TRUE(PITFALL_CUDA_STATUS(stage::init, cudaSuccess, "cudaFree(nullptr)").is_ok());
    const status s = PITFALL_CUDA_STATUS(stage::alloc, cudaErrorMemoryAllocation, "cudaMalloc");
    EXPECT_EQ(s.lib(), library::cuda_runtime);
    EXPECT_EQ(s.name(), "cudaErrorMemoryAllocation");
    EXPECT_EQ(s.where(), stage::alloc);
    EXPECT_FALSE(s.sticky());
    EXPECT_NE(s.message().find("cudaMalloc"), std::string::npos) << s.message();
}

TEST(CudaResources, CreationFollowsTheProbe) {
    const status probe = cuda_probe();
    auto stream = cuda::stream::create(cudaStreamNonBlocking);
    auto event = cuda::event::create(cudaEventDisableTiming);
    auto pinned = cuda::pinned_buffer<float>::allocate(1024);
    if (!probe.is_ok()) {
        ASSERT_FALSE(stream.is_ok());
        EXPECT_EQ(stream.error().name(), probe.name()); // e.g. cudaErrorInsufficientDriver
        EXPECT_EQ(stream.error().where(), stage::init);
        ASSERT_FALSE(event.is_ok());
        EXPECT_EQ(event.error().where(), stage::init);
        ASSERT_FALSE(pinned.is_ok());
        EXPECT_EQ(pinned.error().where(), stage::alloc);
        return;
    }
    ASSERT_TRUE(stream.is_ok()) << stream.error().describe();
    ASSERT_TRUE(event.is_ok()) << event.error().describe();
    ASSERT_TRUE(pinned.is_ok()) << pinned.error().describe();
    EXPECT_EQ(pinned->size(), 1024u);
    EXPECT_EQ(pinned->bytes(), 1024u * sizeof(float));
    EXPECT_EQ(cudaEventRecord(event->get(), stream->get()), cudaSuccess);
    EXPECT_EQ(cudaStreamSynchronize(stream->get()), cudaSuccess);
}

TEST(CudaResources, EmptyGraphHasNoExecutable) {
    cuda::graph none;
    EXPECT_EQ(none.get(), nullptr);
    EXPECT_EQ(none.exec(), nullptr);
}

TEST(CudaResources, LibraryImageFailsByNameWithoutADriver) {
    if (cuda_probe().is_ok())
        GTEST_SKIP() << "a driver answers: the load is a scenario's business (no_kernel_image)";
    const char ptx[] = ".version 8.0\n.target sm_75\n.address_size 64\n";
    auto loaded = cuda::library_image::load(ptx);
    ASSERT_FALSE(loaded.is_ok());
#if CUDART_VERSION >= 12050
    EXPECT_EQ(loaded.error().lib(), library::cuda_runtime);
    EXPECT_EQ(loaded.error().where(), stage::init);
#else
    EXPECT_TRUE(loaded.error().is_unsupported());
#endif
}

} // namespace
