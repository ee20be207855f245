// cuBLAS opened on first call (pitfall/detail/cuda_libraries.hpp), on whatever this machine has:
// where libcublas loads, the SDK's entry points reach it; where it does not, the reason is the
// loader's. (That a CPU case never maps it is checked on the real programs:
// test_lazy_libraries.py.)
#include "pitfall/backend.hpp"
#include "pitfall/detail/cuda_libraries.hpp"

#include <gtest/gtest.h>

#include <link.h>

#include <string>
#include <thread>
#include <vector>

namespace {
using namespace pitfall;
using detail::cuda_library;

bool loaded(const std::string& prefix) {
    struct search {
        std::string prefix;
        bool found = false;
    } s{prefix};
    dl_iterate_phdr(
        [](dl_phdr_info* info, std::size_t, void* data) {
            auto* wanted = static_cast<search*>(data);
            const std::string name = info->dlpi_name != nullptr ? info->dlpi_name : "";
            const auto slash = name.rfind('/');
            if (name.compare(slash == std::string::npos ? 0 : slash + 1, wanted->prefix.size(),
                             wanted->prefix) == 0)
                wanted->found = true;
            return 0;
        },
        &s);
    return s.found;
}

TEST(CudaLibraries, TheSonameIsTheHeadersMajor) {
    EXPECT_EQ(std::string(detail::soname(cuda_library::cublas)),
              "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR));
}

TEST(CudaLibraries, CublasIsOpenedOrTheLoaderSaysWhyNot) {
    // Several threads at once: the library is opened once, and each gets the same answer.
    std::vector<status> answers(4);
    std::vector<std::thread> threads;
    threads.reserve(answers.size());
    for (auto& answer : answers)
        threads.emplace_back(
            [&answer] { answer = detail::open_cuda_library(cuda_library::cublas); });
    for (auto& t : threads)
        t.join();
    for (const auto& answer : answers) {
        EXPECT_EQ(answer.is_ok(), answers.front().is_ok());
        EXPECT_EQ(answer.message(), answers.front().message());
    }
    const status& opened = answers.front();
    const char* name = cublasGetStatusName(CUBLAS_STATUS_NOT_INITIALIZED);
    if (opened.is_ok()) {
        EXPECT_TRUE(loaded("libcublas.so")) << "opened, yet not among the loaded objects";
        EXPECT_STREQ(name, "CUBLAS_STATUS_NOT_INITIALIZED") << "the name is the library's own";
        EXPECT_EQ(detail::unforwarded_call_reason(cuda_library::cublas), nullptr);
        // A real cuBLAS status is the library's, named by it.
        const status s = detail::from_cublas(CUBLAS_STATUS_INVALID_VALUE, "cublasSgemm(...)",
                                             __FILE__, __LINE__);
        EXPECT_EQ(s.lib(), library::cublas);
        EXPECT_EQ(s.name(), "CUBLAS_STATUS_INVALID_VALUE");
        return;
    }
    // No cuBLAS on this machine: every call answers the stand-in, and the status says why.
    EXPECT_EQ(opened.name(), "library_not_loaded");
    EXPECT_EQ(opened.message().rfind(
                  std::string(detail::soname(cuda_library::cublas)) + " could not be loaded: ", 0),
              0u)
        << opened.message();
    ASSERT_NE(detail::unforwarded_call_reason(cuda_library::cublas), nullptr);
    const status s = detail::from_cublas(CUBLAS_STATUS_NOT_INITIALIZED, "cublasGetStatusName(1)",
                                         __FILE__, __LINE__);
    EXPECT_EQ(s.lib(), library::host);
    EXPECT_EQ(s.name(), "library_not_loaded");
    EXPECT_EQ(s.where(), stage::init);
}

TEST(CudaLibraries, ACallThatDidNotReachTheLibraryIsReportedAsSuch) {
    const status s = detail::library_not_loaded(
        "libcudnn.so.9 could not be loaded: libcudnn.so.9: cannot open shared object file",
        "cudnnCreate(&handle)", "x.cu", 7);
    EXPECT_EQ(s.lib(), library::host);
    EXPECT_EQ(s.name(), "library_not_loaded");
    EXPECT_EQ(s.where(), stage::init);
    EXPECT_FALSE(s.sticky());
    EXPECT_EQ(s.message(), "libcudnn.so.9 could not be loaded: libcudnn.so.9: cannot open shared "
                           "object file (from cudnnCreate(&handle))");
    EXPECT_EQ(s.line(), 7);
}
} // namespace
