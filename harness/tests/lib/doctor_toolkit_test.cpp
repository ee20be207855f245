// The toolkit rule over real files: fake toolkit folders whose bin/nvcc is a shell script that
// answers `--version` as nvcc does, run as real child processes by toolkit_facts.
#include "doctor/doctor.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace {
using namespace pitfall::runner;
using nlohmann::json;
namespace fs = std::filesystem;

class DoctorToolkit : public ::testing::Test {
protected:
    void SetUp() override {
        std::string pattern = (fs::temp_directory_path() / "pitfall-toolkit-XXXXXX").string();
        ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
        m_root = pattern;
    }
    void TearDown() override { fs::remove_all(m_root); }

    /// <root>/<name>/bin/nvcc printing `body` (sh), executable unless said otherwise.
    std::string toolkit(const std::string& name, const std::string& body, bool executable = true) {
        const fs::path bin = m_root / name / "bin";
        fs::create_directories(bin);
        std::ofstream(bin / "nvcc") << "#!/bin/sh\n" << body << "\n";
        fs::permissions(bin / "nvcc", executable ? fs::perms::owner_all
                                                 : fs::perms::owner_read | fs::perms::owner_write);
        return (m_root / name).string();
    }
    static std::string says_release(const std::string& release) {
        return "echo 'nvcc: NVIDIA (R) Cuda compiler driver'\necho 'Cuda compilation tools, "
               "release " +
               release + ", V" + release + ".88'";
    }
    /// A CUDA 13.0 build's fingerprint, cut to what the rule reads, with these toolkits.
    static json fingerprint(const json& toolkits) {
        return {{"schema", "pitfall.fingerprint/1"},
                {"libraries",
                 {{"built_with_cuda", true},
                  {"cuda", {{"compiled_runtime_version", 13000}, {"runtime_version", 13000}}}}},
                {"environment", json::object()},
                {"toolkits", toolkits}};
    }
    static const finding* find(const diagnosis& d, const std::string& id) {
        for (const auto& f : d.findings)
            if (f.id == id)
                return &f;
        return nullptr;
    }

    fs::path m_root;
};

TEST(DoctorToolkitRelease, ReadFromNvccsOwnWords) {
    EXPECT_EQ(nvcc_release("Cuda compilation tools, release 13.0, V13.0.88"), "13.0");
    EXPECT_EQ(nvcc_release("Cuda compilation tools, release 12.4, V12.4.131\nBuild cuda_12.4"),
              "12.4");
    EXPECT_EQ(nvcc_release("release 9"), "");
    EXPECT_EQ(nvcc_release("release .4"), "");
    EXPECT_EQ(nvcc_release("no such words"), "");
    EXPECT_EQ(nvcc_release(std::string("release 1\xff.2")), "");
}

TEST_F(DoctorToolkit, PathOlderThanTheRuntimeIsAWarningNamingBoth) {
    const std::string old_kit = toolkit("cuda-12.4", says_release("12.4"));
    const std::string new_kit = toolkit("cuda-13.0", says_release("13.0"));
    const json facts =
        toolkit_facts(old_kit + "/bin:/usr/bin", std::make_pair(std::string("CUDA_HOME"), new_kit));
    EXPECT_EQ(facts["path"]["release"], "12.4");
    EXPECT_EQ(facts["path"]["nvcc"], old_kit + "/bin/nvcc");
    EXPECT_EQ(facts["cuda_home"]["release"], "13.0");
    EXPECT_EQ(facts["cuda_home"]["variable"], "CUDA_HOME");

    const diagnosis d = diagnose(fingerprint(facts));
    const finding* f = find(d, "toolkit-mismatch");
    ASSERT_NE(f, nullptr) << d.to_json().dump(2);
    EXPECT_EQ(f->severity, finding_severity::warning);
    EXPECT_NE(f->title.find("nvcc on PATH (CUDA 12.4)"), std::string::npos) << f->title;
    EXPECT_NE(f->title.find("runtime CUDA 13.0"), std::string::npos) << f->title;
    EXPECT_EQ(f->title.find("CUDA_HOME"), std::string::npos) << "CUDA_HOME matches: " << f->title;
    EXPECT_NE(f->observed.find(old_kit + "/bin/nvcc, release 12.4"), std::string::npos);
    EXPECT_NE(f->observed.find("CUDA_HOME=" + new_kit), std::string::npos) << f->observed;
    EXPECT_EQ(f->rule, "docs/cuda-rules.md#toolkit-on-path");
    EXPECT_EQ(find(d, "toolkit"), nullptr);
}

TEST_F(DoctorToolkit, CudaHomeNewerThanTheRuntimeIsNamed) {
    const std::string same = toolkit("cuda-13.0", says_release("13.0"));
    const std::string newer = toolkit("cuda-13.2", says_release("13.2"));
    const diagnosis d = diagnose(
        fingerprint(toolkit_facts(same + "/bin", std::make_pair(std::string("CUDA_PATH"), newer))));
    const finding* f = find(d, "toolkit-mismatch");
    ASSERT_NE(f, nullptr);
    EXPECT_NE(f->title.find("CUDA_PATH (CUDA 13.2)"), std::string::npos) << f->title;
    EXPECT_EQ(f->title.find("PATH (CUDA 13.0)"), std::string::npos) << f->title;
}

TEST_F(DoctorToolkit, MatchingToolkitsAreOk) {
    const std::string kit = toolkit("cuda-13.0", says_release("13.0"));
    const diagnosis d = diagnose(
        fingerprint(toolkit_facts(kit + "/bin", std::make_pair(std::string("CUDA_HOME"), kit))));
    EXPECT_EQ(find(d, "toolkit-mismatch"), nullptr);
    const finding* ok = find(d, "toolkit");
    ASSERT_NE(ok, nullptr);
    EXPECT_EQ(ok->severity, finding_severity::ok);
}

TEST_F(DoctorToolkit, PathIsSearchedAsExecvpDoes) {
    // Not executable, then a folder called nvcc, then the real one: the third is the one.
    const std::string skipped = toolkit("not-executable", says_release("11.8"), false);
    fs::create_directories(m_root / "dir-named-nvcc" / "bin" / "nvcc");
    const std::string found = toolkit("found", says_release("12.9"));
    const json facts = toolkit_facts(skipped + "/bin:" + (m_root / "dir-named-nvcc").string() +
                                         "/bin::" + found + "/bin",
                                     std::nullopt);
    EXPECT_EQ(facts["path"]["nvcc"], found + "/bin/nvcc");
    EXPECT_EQ(facts["path"]["release"], "12.9");
    EXPECT_FALSE(facts.contains("cuda_home"));
    EXPECT_EQ(toolkit_facts("/nonexistent", std::nullopt)["path"]["error"], "no nvcc on PATH");
}

TEST_F(DoctorToolkit, BrokenToolkitsAreReportedNotTrusted) {
    const std::string failing = toolkit("failing", "echo 'release 12.4'; exit 3");
    const std::string silent = toolkit("silent", "echo garbage; printf '\\377\\376'");
    EXPECT_EQ(toolkit_facts(failing + "/bin", std::nullopt)["path"]["error"],
              "`nvcc --version` failed (exit 3)");
    EXPECT_EQ(toolkit_facts(silent + "/bin", std::nullopt)["path"]["error"],
              "`nvcc --version` names no release");

    // CUDA_HOME pointing at a folder without bin/nvcc: a rebuild that reads it fails.
    const json facts = toolkit_facts(
        silent + "/bin", std::make_pair(std::string("CUDA_HOME"), (m_root / "empty").string()));
    EXPECT_EQ(facts["cuda_home"]["error"], "no executable bin/nvcc there");
    const diagnosis d = diagnose(fingerprint(facts));
    const finding* f = find(d, "toolkit-mismatch");
    ASSERT_NE(f, nullptr);
    EXPECT_NE(f->title.find("CUDA_HOME (no nvcc)"), std::string::npos) << f->title;
}

TEST_F(DoctorToolkit, NoToolkitFactsOrNoRuntimeMeansNoSay) {
    // A run's fingerprint carries no "toolkits" (only doctor asks nvcc): the rule is silent.
    json fp = fingerprint(json());
    fp.erase("toolkits");
    EXPECT_EQ(find(diagnose(fp), "toolkit-mismatch"), nullptr);
    EXPECT_EQ(find(diagnose(fp), "toolkit"), nullptr);
    // A build without CUDA has no runtime to compare with.
    const std::string kit = toolkit("cuda-12.4", says_release("12.4"));
    json host_only = fingerprint(toolkit_facts(kit + "/bin", std::nullopt));
    host_only["libraries"] = {{"built_with_cuda", false}};
    EXPECT_EQ(find(diagnose(host_only), "toolkit-mismatch"), nullptr);
}

} // namespace
