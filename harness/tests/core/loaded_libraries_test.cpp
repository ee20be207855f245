// The libraries a process has mapped: versions from file names, /proc/<pid>/maps parsed from a
// synthetic text, and this very process after it opened a library named like cuDNN.
#include "pitfall/detail/loaded_libraries.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

#include <dlfcn.h>
#include <unistd.h>

namespace {
using namespace pitfall::detail;
namespace fs = std::filesystem;

TEST(LoadedLibraries, VersionFromFileName) {
    EXPECT_EQ(version_from_file_name("libcudnn.so.9.14.0"), "9.14.0");
    EXPECT_EQ(version_from_file_name("libcuda.so.580.65.06"), "580.65.06");
    EXPECT_EQ(version_from_file_name("libcudart.so.13"), "13");
    EXPECT_EQ(version_from_file_name("libcuda.so"), "");
    EXPECT_EQ(version_from_file_name("libcuda.so.1a"), "");
    EXPECT_EQ(version_from_file_name("libcuda.so.9..1"), "");
    EXPECT_EQ(version_from_file_name("libcuda.so.9."), "");
    EXPECT_EQ(version_from_file_name("libcuda.so."), "");
}

TEST(LoadedLibraries, OnlyTheCudaLibrariesAreWatched) {
    EXPECT_EQ(watched_library_name("libcuda.so.1"), "libcuda");
    EXPECT_EQ(watched_library_name("libcudart.so.13.0.96"), "libcudart");
    EXPECT_EQ(watched_library_name("libcublasLt.so.13"), "libcublasLt");
    EXPECT_EQ(watched_library_name("libcudnn_ops.so.9"), "libcudnn_ops");
    EXPECT_EQ(watched_library_name("libnvrtc-builtins.so.13.0"), "libnvrtc-builtins");
    EXPECT_EQ(watched_library_name("libnvidia-ptxjitcompiler.so.1"), "libnvidia-ptxjitcompiler");
    EXPECT_EQ(watched_library_name("libcudaX.so.1"), "");
    EXPECT_EQ(watched_library_name("libz.so.1"), "");
    EXPECT_EQ(watched_library_name("libcudnn.sox"), "");
    EXPECT_EQ(watched_library_name(".so.1"), "");
}

TEST(LoadedLibraries, MapsTextParsed) {
    const std::string maps =
        "7f00-7f10 r--p 00000000 08:01 123 /usr/lib/x86_64-linux-gnu/libcuda.so.580.65.06\n"
        "7f10-7f20 r-xp 00010000 08:01 123 /usr/lib/x86_64-linux-gnu/libcuda.so.580.65.06\n"
        "7f20-7f30 r--p 00000000 08:01 124 /opt/my libs/libcudnn.so.9\n"
        "7f30-7f40 rw-p 00000000 00:00 0 \n"
        "7f40-7f50 rw-p 00000000 00:00 0          [heap]\n"
        "7f50-7f60 r--p 00000000 08:01 125 /usr/lib/x86_64-linux-gnu/libz.so.1.2.13\n"
        "7f60-7f70 r--p 00000000 08:01 126 /venv/nvidia/cublas/lib/libcublasLt.so.13 (deleted)\n"
        "garbage\n"
        "7f70-7f80 r--p\n";
    const std::map<std::string, std::string> links = {
        {"/opt/my libs/libcudnn.so.9", "/opt/my libs/libcudnn.so.9.1.0"}};
    const auto found =
        parse_loaded_libraries(maps,
                               [&](const std::string& path) {
                                   const auto it = links.find(path);
                                   return it == links.end() ? std::string() : it->second;
                               },
                               {{"/usr/lib/x86_64-linux-gnu/libcuda.so.580.65.06",
                                 "/usr/lib/x86_64-linux-gnu/libcuda.so.1"}});
    ASSERT_EQ(found.size(), 3u);
    EXPECT_EQ(found[0].name, "libcuda");
    EXPECT_EQ(found[0].path, "/usr/lib/x86_64-linux-gnu/libcuda.so.1"); // as the loader named it
    EXPECT_EQ(found[0].real_path, "/usr/lib/x86_64-linux-gnu/libcuda.so.580.65.06");
    EXPECT_EQ(found[0].version, "580.65.06");
    EXPECT_EQ(found[1].name, "libcudnn");
    EXPECT_EQ(found[1].path, "/opt/my libs/libcudnn.so.9");
    EXPECT_EQ(found[1].real_path, "/opt/my libs/libcudnn.so.9.1.0");
    EXPECT_EQ(found[1].version, "9.1.0");
    EXPECT_EQ(found[2].name, "libcublasLt");
    EXPECT_EQ(found[2].version, ""); // "13 (deleted)" is no version
    const auto j = loaded_libraries_json(found);
    ASSERT_EQ(j.size(), 3u);
    EXPECT_EQ(j[1]["version"], "9.1.0");
}

// A real library copied under a cuDNN-like name, behind a symlink, opened by this process:
// /proc/self/maps must then show it, resolved, with the real file's version.
TEST(LoadedLibraries, ThisProcessAfterDlopen) {
    const fs::path source = "/lib/x86_64-linux-gnu/libz.so.1";
    if (!fs::exists(source))
        GTEST_SKIP() << "no " << source << " to copy";
    const fs::path dir = fs::temp_directory_path() / ("pitfall-maps-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    const fs::path real = dir / "libcudnn_fake.so.9.1.0";
    fs::copy_file(source, real, fs::copy_options::overwrite_existing);
    fs::create_symlink(real.filename(), dir / "libcudnn_fake.so.9");
    for (const auto& l : read_loaded_libraries())
        EXPECT_NE(l.name, "libcudnn_fake") << "mapped before it was opened";
    void* handle = dlopen((dir / "libcudnn_fake.so.9").c_str(), RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(handle, nullptr) << dlerror();
    bool seen = false;
    for (const auto& l : read_loaded_libraries())
        if (l.name == "libcudnn_fake") {
            seen = true;
            EXPECT_EQ(l.path, (dir / "libcudnn_fake.so.9").string());
            EXPECT_EQ(l.real_path, real.string());
            EXPECT_EQ(l.version, "9.1.0");
        }
    EXPECT_TRUE(seen);
    dlclose(handle);
    fs::remove_all(dir);
}

} // namespace
