// The fatbin reader and the compatibility rules, on synthetic images and containers. Expected
// answers are derived by hand from the CUDA C++ Programming Guide ("Binary Compatibility", "PTX
// Compatibility", "Feature Availability") and the PTX ISA release notes, not from the code.
#include "pitfall/detail/fatbin.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace {
using namespace pitfall::detail;

::testing::AssertionResult contains(const std::string& text, const std::string& part) {
    if (text.find(part) != std::string::npos)
        return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "'" << text << "' lacks '" << part << "'";
}

fatbin_image sass(unsigned arch, arch_variant v = arch_variant::plain) {
    return {image_kind::sass, arch, v, 1, 8};
}
fatbin_image ptx(unsigned arch, arch_variant v = arch_variant::plain, unsigned isa_major = 9,
                 unsigned isa_minor = 0) {
    return {image_kind::ptx, arch, v, isa_major, isa_minor};
}
constexpr int cuda_13_0 = 13000;
constexpr int cuda_12_4 = 12040;
constexpr auto arch_specific = arch_variant::arch_specific;
constexpr auto family = arch_variant::family;

image_prediction predict(const std::vector<fatbin_image>& images, unsigned cc,
                         int driver = cuda_13_0) {
    return predict_image(images, cc, driver, false, false);
}

TEST(FatbinRules, ArchSpecificSassRunsOnlyOnItsOwnComputeCapability) {
    const auto on_10_3 = predict({sass(100, arch_specific)}, 103);
    EXPECT_EQ(on_10_3.how, image_path::no_image);
    EXPECT_EQ(on_10_3.error, "cudaErrorNoKernelImageForDevice");
    EXPECT_TRUE(contains(on_10_3.reason, "SASS sm_100a runs only on 10.0"));
    EXPECT_EQ(predict({sass(100, arch_specific)}, 100).how, image_path::sass);
    EXPECT_EQ(predict({sass(90, arch_specific)}, 100).how, image_path::no_image);
}

TEST(FatbinRules, ArchSpecificPtxNeverJitsToANewerArchitecture) {
    const auto on_10_0 = predict({ptx(90, arch_specific)}, 100);
    EXPECT_EQ(on_10_0.how, image_path::no_image);
    EXPECT_TRUE(contains(on_10_0.reason, "PTX compute_90a JITs only to 9.0"));
    EXPECT_EQ(predict({ptx(90, arch_specific)}, 90).how, image_path::ptx_jit);
    EXPECT_FALSE(ptx_jits_to(90, arch_specific, 120));
}

TEST(FatbinRules, FamilyPtxStaysWithinItsMajor) {
    const std::vector<fatbin_image> images = {ptx(100, family)};
    EXPECT_EQ(predict(images, 100).how, image_path::ptx_jit);
    const auto on_10_3 = predict(images, 103);
    EXPECT_EQ(on_10_3.how, image_path::ptx_jit);
    EXPECT_EQ(on_10_3.describe(103), "runs by PTX JIT from compute_100f to sm_103");
    for (const unsigned cc : {110u, 120u}) {
        const auto p = predict(images, cc);
        EXPECT_EQ(p.how, image_path::no_image) << cc;
        EXPECT_TRUE(contains(p.reason, "PTX compute_100f JITs only within 10.x")) << cc;
    }
    EXPECT_FALSE(ptx_jits_to(103, family, 100)); // compute_103f: 10.3 and newer 10.x only
}

TEST(FatbinRules, FamilySassRunsOnNewerMinorsOfItsMajor) {
    EXPECT_TRUE(sass_runs_on(100, family, 100));
    EXPECT_TRUE(sass_runs_on(100, family, 103));
    EXPECT_FALSE(sass_runs_on(103, family, 100));
    EXPECT_FALSE(sass_runs_on(100, family, 110));
    EXPECT_FALSE(sass_runs_on(120, family, 130));
    EXPECT_EQ(predict({sass(100, family)}, 103).describe(103), "runs from SASS sm_100f");
}

TEST(FatbinRules, PlainSassRunsOnNewerMinorsOfItsMajorOnly) {
    EXPECT_EQ(predict({sass(86)}, 89).how, image_path::sass);
    const auto on_8_0 = predict({sass(86)}, 80);
    EXPECT_EQ(on_8_0.how, image_path::no_image);
    EXPECT_TRUE(contains(on_8_0.reason, "SASS sm_86 needs 8.6 or newer within 8.x"));
    EXPECT_FALSE(sass_runs_on(90, arch_variant::plain, 100));
}

TEST(FatbinRules, PlainPtxJitsToAnyNewerDevice) {
    const auto p = predict({sass(90), ptx(90)}, 120);
    EXPECT_EQ(p.how, image_path::ptx_jit);
    EXPECT_EQ(p.image.name(), "compute_90");
    EXPECT_EQ(p.describe(120), "runs by PTX JIT from compute_90 to sm_120");
}

TEST(FatbinRules, PtxNewerThanTheDriverIsAnUnsupportedPtxVersion) {
    const auto p = predict({ptx(90, arch_variant::plain, 9, 0)}, 120, cuda_12_4);
    EXPECT_EQ(p.how, image_path::no_image);
    EXPECT_EQ(p.error, "cudaErrorUnsupportedPtxVersion");
    EXPECT_TRUE(contains(p.describe(120), "PTX ISA 9.0 is newer than this driver can JIT "
                                          "(max 8.4, CUDA 12.4 driver): "
                                          "cudaErrorUnsupportedPtxVersion"));
    // SASS needs no JIT: the same binary with sm_120 runs under that driver.
    EXPECT_EQ(predict({sass(120), ptx(90)}, 120, cuda_12_4).how, image_path::sass);
    // No driver to ask (0): no claim about the PTX ISA.
    EXPECT_EQ(predict({ptx(90)}, 120, 0).how, image_path::ptx_jit);
}

TEST(FatbinRules, TheDefaultBuildOnOlderAndNewerDevices) {
    // CMAKE_CUDA_ARCHITECTURES "75-real;80-real;86-real;89-real;90".
    const std::vector<fatbin_image> images = {sass(75), sass(80), sass(86),
                                              sass(89), sass(90), ptx(90)};
    EXPECT_EQ(predict(images, 70).describe(70),
              "fails: SASS sm_75 needs 7.5 or newer within 7.x; PTX compute_90 needs 9.0 or "
              "newer: cudaErrorNoKernelImageForDevice");
    EXPECT_EQ(predict(images, 87).describe(87), "runs from SASS sm_86"); // the newest that fits
    EXPECT_EQ(predict(images, 100).describe(100), "runs by PTX JIT from compute_90 to sm_100");
}

TEST(FatbinRules, JitSwitches) {
    const std::vector<fatbin_image> images = {sass(90), ptx(90)};
    EXPECT_EQ(predict_image(images, 90, cuda_13_0, true, false).how, image_path::ptx_jit);
    const auto disabled = predict_image(images, 100, cuda_13_0, false, true);
    EXPECT_EQ(disabled.how, image_path::no_image);
    EXPECT_EQ(disabled.error, "cudaErrorNoKernelImageForDevice");
    EXPECT_TRUE(contains(disabled.reason, "CUDA_DISABLE_PTX_JIT=1"));
    const auto forced = predict_image({sass(90)}, 90, cuda_13_0, true, false);
    EXPECT_TRUE(contains(forced.reason, "CUDA_FORCE_PTX_JIT=1 skips the SASS; no PTX"));
    EXPECT_EQ(predict({}, 90).reason, "no device code in the binary");
}

TEST(FatbinRules, PtxIsaOfEachDriver) {
    const auto max_text = [](int driver) {
        const auto isa = max_ptx_isa(driver);
        return isa ? isa->text() : std::string("none");
    };
    // PTX ISA release notes: 7.8 CUDA 11.8, 8.0 12.0, 8.4 12.4, 8.5 12.5 (12.6 adds none),
    // 8.6 12.7, 8.7 12.8, 8.8 12.9, 9.0 13.0.
    EXPECT_EQ(max_text(11080), "7.8");
    EXPECT_EQ(max_text(12000), "8.0");
    EXPECT_EQ(max_text(12040), "8.4");
    EXPECT_EQ(max_text(12060), "8.5");
    EXPECT_EQ(max_text(12080), "8.7");
    EXPECT_EQ(max_text(12090), "8.8");
    EXPECT_EQ(max_text(13000), "9.0");
    EXPECT_EQ(max_text(0), "none");
    EXPECT_EQ(max_text(8000), "none");
    EXPECT_EQ(first_driver_for_ptx_isa({8, 6}), 12070);
    EXPECT_EQ(first_driver_for_ptx_isa({9, 0}), 13000);
    EXPECT_FALSE(first_driver_for_ptx_isa({99, 0}).has_value());
    EXPECT_TRUE(driver_can_jit({8, 5}, 12060));
    EXPECT_FALSE(driver_can_jit({8, 7}, 12060));
    EXPECT_TRUE(driver_can_jit({5, 0}, 9000));   // older than the table: every driver it knows
    EXPECT_FALSE(driver_can_jit({9, 9}, 13000)); // newer than the table, driver within it
}

TEST(FatbinRules, NamesAndComputeCapabilities) {
    EXPECT_EQ(sass(90, arch_specific).name(), "sm_90a");
    EXPECT_EQ(sass(100, family).describe(), "SASS sm_100f");
    EXPECT_EQ(ptx(100, family).describe(), "PTX compute_100f (PTX ISA 9.0)");
    EXPECT_EQ(ptx(90, arch_specific, 8, 4).describe(), "PTX compute_90a (PTX ISA 8.4)");
    EXPECT_EQ(cc_text(103), "10.3");
    EXPECT_EQ(parse_compute_capability("8.6"), 86u);
    EXPECT_EQ(parse_compute_capability("10.3"), 103u);
    EXPECT_EQ(parse_compute_capability("12.0"), 120u);
    for (const char* bad : {"", "8", "8.", ".6", "8.10", "a.b", "100.0", "8.6.1", "-8.6"})
        EXPECT_FALSE(parse_compute_capability(bad).has_value()) << bad;
    EXPECT_EQ(cuda_version_text(12040), "12.4");
}

// ---------------------------------------------------------------------------------------------
// The reader, on containers built here with the layout nvcc writes.
// ---------------------------------------------------------------------------------------------

template <class T> void put(std::string& bytes, std::size_t offset, T value) {
    std::memcpy(bytes.data() + offset, &value, sizeof value);
}

struct entry_spec {
    std::uint16_t kind;
    std::uint32_t arch;
    std::uint64_t flags; // as nvcc 13.0 writes them
    std::uint16_t major;
    std::uint16_t minor;
    std::uint64_t payload = 16;
};

std::string entry(const entry_spec& e) {
    std::string header(64, '\0');
    put<std::uint16_t>(header, 0, e.kind);
    put<std::uint16_t>(header, 2, 0x0101);
    put<std::uint32_t>(header, 4, 64);
    put<std::uint64_t>(header, 8, e.payload);
    put<std::uint16_t>(header, 24, e.minor);
    put<std::uint16_t>(header, 26, e.major);
    put<std::uint32_t>(header, 28, e.arch);
    put<std::uint64_t>(header, 40, e.flags);
    return header + std::string(e.payload, 'x');
}

std::string container(const std::vector<entry_spec>& entries) {
    std::string body;
    for (const auto& e : entries)
        body += entry(e);
    std::string header(16, '\0');
    put<std::uint32_t>(header, 0, fatbin_magic);
    put<std::uint16_t>(header, 4, 1);
    put<std::uint16_t>(header, 6, 16);
    put<std::uint64_t>(header, 8, body.size());
    return header + body;
}

std::vector<std::string> names(const std::vector<fatbin_image>& images) {
    std::vector<std::string> out;
    out.reserve(images.size());
    for (const auto& img : images)
        out.push_back(img.name() + "#" + std::to_string(img.container));
    return out;
}

TEST(FatbinReader, SuffixesComeFromTheEntryFlags) {
    const std::string bytes =
        container({{2, 86, 0x11, 1, 8},
                   {2, 90, 0x100011, 1, 8},    // sm_90a
                   {1, 90, 0x108011, 9, 0}}) + // compute_90a (zstd-compressed PTX: 0x8000)
        std::string(8, '\0') +                 // padding between containers
        container({{2, 100, 0x1200011, 1, 8},  // sm_100f
                   {1, 100, 0x208011, 9, 0},   // compute_100f
                   {8, 100, 0x11, 0, 0}});     // another kind (not SASS or PTX): skipped
    const auto images = parse_fatbin(bytes, "t.fatbin");
    ASSERT_TRUE(images.is_ok()) << images.error().message();
    EXPECT_EQ(names(images.value()),
              (std::vector<std::string>{"sm_86#0", "sm_90a#0", "compute_90a#0", "sm_100f#1",
                                        "compute_100f#1"}));
    EXPECT_EQ(images.value()[2].describe(), "PTX compute_90a (PTX ISA 9.0)");
}

TEST(FatbinReader, MalformedContainersAreErrors) {
    const auto error_of = [](const std::string& bytes) {
        const auto r = parse_fatbin(bytes, "t.fatbin");
        return r.is_ok() ? std::string("(ok)") : r.error().name() + ": " + r.error().message();
    };
    std::string past = container({{2, 86, 0x11, 1, 8}});
    put<std::uint64_t>(past, 16 + 8, 1000); // the entry's payload runs past its container
    EXPECT_EQ(error_of(past), "malformed_elf: t.fatbin: fatbin entry of 1000 bytes runs past its "
                              "container");
    std::string short_header = container({{2, 86, 0x11, 1, 8}});
    put<std::uint32_t>(short_header, 16 + 4, 8);
    EXPECT_EQ(error_of(short_header), "malformed_elf: t.fatbin: truncated fatbin entry header");
    std::string long_container = container({{2, 86, 0x11, 1, 8}});
    put<std::uint64_t>(long_container, 8, ~std::uint64_t{0});
    EXPECT_TRUE(contains(error_of(long_container), "runs past the end of the fatbinary"));
    EXPECT_EQ(error_of(std::string(64, '\0')), "(ok)"); // no container at all: no images
}

TEST(FatbinReader, ElfFilesAreCheckedBeforeUse) {
    const auto not_elf =
        parse_elf("plain text, long enough to hold an ELF header's 64 bytes....", "t.txt");
    ASSERT_FALSE(not_elf.is_ok());
    EXPECT_EQ(not_elf.error().message(), "t.txt: not an ELF file");
    const auto missing = read_elf("/nonexistent/program");
    ASSERT_FALSE(missing.is_ok());
    EXPECT_EQ(missing.error().name(), "unreadable_file");
    // This test program: an ELF file with sections.
    const auto self = read_elf("/proc/self/exe");
    ASSERT_TRUE(self.is_ok()) << self.error().message();
    EXPECT_NE(self.value().find(".text"), nullptr);
    std::string truncated = self.value().bytes.substr(0, 64); // the header, no section headers
    const auto cut = parse_elf(truncated, "cut");
    ASSERT_FALSE(cut.is_ok());
    EXPECT_EQ(cut.error().message(), "cut: section headers out of the file");
}

} // namespace
