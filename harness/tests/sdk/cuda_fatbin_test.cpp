// The fatbin reader on a real nvcc-built program (cuda/fatbin_sample.cu, built for
// "86-real;90a-real;100f"): the a/f suffixes come back from the file, and the rules place each
// image. Built only with CUDA (the file name decides); the sample needs nvcc 12.9 or newer
// (family-specific targets), and without it the test is skipped, saying so.
#include "pitfall/detail/fatbin.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace {
using namespace pitfall::detail;

#ifdef PITFALL_FATBIN_SAMPLE

std::vector<fatbin_image> sample_images() {
    const auto elf = read_elf(PITFALL_FATBIN_SAMPLE);
    if (!elf.is_ok()) {
        ADD_FAILURE() << elf.error().message();
        return {};
    }
    const auto images = fatbin_images(elf.value(), PITFALL_FATBIN_SAMPLE);
    if (!images.is_ok()) {
        ADD_FAILURE() << images.error().message();
        return {};
    }
    return images.value();
}

TEST(FatbinSample, ListsArchAndFamilySpecificTargets) {
    std::vector<std::string> names;
    for (const auto& img : sample_images())
        names.push_back((img.is_ptx() ? "PTX " : "SASS ") + img.name());
    std::sort(names.begin(), names.end());
    EXPECT_EQ(names, (std::vector<std::string>{"PTX compute_100f", "SASS sm_100f", "SASS sm_86",
                                               "SASS sm_90a"}));
}

TEST(FatbinSample, PredictionsFollowTheSuffixes) {
    const auto images = sample_images();
    // Driver 0: no claim about the PTX ISA, which is the building toolkit's.
    const auto describe = [&](unsigned cc) {
        return predict_image(images, cc, 0, false, false).describe(cc);
    };
    EXPECT_EQ(describe(89), "runs from SASS sm_86");
    EXPECT_EQ(describe(90), "runs from SASS sm_90a");
    EXPECT_EQ(describe(103), "runs from SASS sm_100f");
    // Neither sm_90a nor compute_100f reaches another major: nothing runs on 12.0.
    EXPECT_EQ(describe(120), "fails: no SASS for 12.x; PTX compute_100f JITs only within 10.x, "
                             "to 10.0 or newer: cudaErrorNoKernelImageForDevice");
    EXPECT_EQ(predict_image(images, 103, 0, true, false).describe(103),
              "runs by PTX JIT from compute_100f to sm_103");
}

#else
TEST(FatbinSample, NeedsTheSampleProgram) {
    GTEST_SKIP() << PITFALL_FATBIN_SAMPLE_MISSING;
}
#endif

} // namespace
