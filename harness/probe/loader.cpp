// What the dynamic loader loaded into this process, and where it looks for a library: two
// copies of one soname (a pip wheel's cuDNN and the system's) are told apart here.
#include "probe.hpp"

#include "pitfall/detail/text.hpp"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <dirent.h>
#include <dlfcn.h>
#include <glob.h>
#include <link.h>

namespace pitfall::probe {
using nlohmann::json;

std::string dl_error_text(const char* fallback) {
    const char* why = dlerror();
    return pitfall::detail::valid_utf8(why != nullptr ? why : fallback);
}

std::string library_file(void* symbol) {
    Dl_info where{};
    if (symbol == nullptr || dladdr(symbol, &where) == 0 || where.dli_fname == nullptr)
        return {};
    char resolved[PATH_MAX];
    return pitfall::detail::valid_utf8(
        realpath(where.dli_fname, resolved) != nullptr ? resolved : where.dli_fname);
}

// The shared libraries actually loaded (a system cuDNN vs a pip wheel's is exactly the
// difference that matters; tools that print the "installed" version get it wrong).
json loaded_libraries() {
    json out = json::array();
    dl_iterate_phdr(
        [](struct dl_phdr_info* info, size_t, void* data) {
            const std::string name = info->dlpi_name != nullptr ? info->dlpi_name : "";
            for (const char* interesting :
                 {"cuda", "cublas", "cudnn", "openblas", "nvrtc", "libcuda"})
                if (name.find(interesting) != std::string::npos) {
                    static_cast<json*>(data)->push_back(name);
                    break;
                }
            return 0;
        },
        &out);
    return out;
}

namespace {

/// LD_LIBRARY_PATH's folders, in order (empty items skipped).
std::vector<std::string> library_path_folders() {
    std::vector<std::string> dirs;
    if (const char* path = std::getenv("LD_LIBRARY_PATH")) {
        std::string all = path;
        for (std::size_t start = 0; start <= all.size();) {
            const std::size_t colon = std::min(all.find(':', start), all.size());
            if (colon > start)
                dirs.push_back(all.substr(start, colon - start));
            start = colon + 1;
        }
    }
    return dirs;
}

/// The folders of /etc/ld.so.conf, its includes (globs) followed in the order ldconfig reads
/// them; at most 256 files, so an include loop ends.
std::vector<std::string> ld_so_conf_folders() {
    std::vector<std::string> dirs;
    std::vector<std::string> conf_files = {"/etc/ld.so.conf"};
    for (std::size_t i = 0; i < conf_files.size() && i < 256; ++i) {
        std::ifstream in(conf_files[i]);
        for (std::string line; std::getline(in, line);) {
            line = line.substr(0, line.find('#'));
            const auto first = line.find_first_not_of(" \t");
            if (first == std::string::npos)
                continue;
            line = line.substr(first, line.find_last_not_of(" \t\r") - first + 1);
            if (line.rfind("include", 0) == 0) {
                glob_t found{};
                const std::string pattern = line.substr(line.find_first_not_of(" \t", 7));
                if (glob(pattern.c_str(), 0, nullptr, &found) == 0)
                    for (std::size_t k = 0; k < found.gl_pathc; ++k)
                        conf_files.emplace_back(found.gl_pathv[k]);
                globfree(&found);
            } else if (line.front() == '/') {
                dirs.push_back(line);
            }
        }
    }
    return dirs;
}

/// The CUDA libraries' sonames in `dir`, sorted.
std::vector<std::string> cuda_sonames_in(const std::string& dir) {
    static const std::regex soname(
        R"(lib(cuda|cudart|cudnn|cublas|cublasLt|nvidia-ml|nvrtc)\.so\.[0-9]+)");
    std::vector<std::string> names;
    DIR* d = opendir(dir.c_str());
    if (d == nullptr)
        return names;
    while (const dirent* e = readdir(d))
        if (std::regex_match(e->d_name, soname))
            names.emplace_back(e->d_name);
    closedir(d);
    std::sort(names.begin(), names.end());
    return names;
}

} // namespace

/// The folders the dynamic loader searches, in its order: LD_LIBRARY_PATH, then
/// /etc/ld.so.conf (with its includes), then the built-in system folders. Two copies of one
/// soname there (a pip wheel's cuDNN and the system's, two toolkits' runtimes) decide which
/// loads by this order alone.
std::vector<std::string> loader_folders() {
    std::vector<std::string> dirs = library_path_folders();
    for (auto& dir : ld_so_conf_folders())
        dirs.push_back(std::move(dir));
    for (const char* system :
         {"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu",
          "/usr/lib/aarch64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib"})
        dirs.emplace_back(system);
    return dirs;
}

/// Every copy of a CUDA library's soname (libcudart.so.13, libcudnn.so.9, ...) in the loader's
/// folders, in search order, with the version its file name carries. The same file reached
/// twice (a symlinked folder) counts once.
json loader_path_copies() {
    std::map<std::string, json> by_soname;
    std::set<std::string> seen_files;
    std::set<std::string> seen_dirs;
    for (const auto& dir : loader_folders()) {
        char resolved_dir[PATH_MAX];
        if (realpath(dir.c_str(), resolved_dir) == nullptr ||
            !seen_dirs.insert(resolved_dir).second)
            continue;
        for (const auto& name : cuda_sonames_in(dir)) {
            std::string file = dir + "/";
            file += name;
            char resolved[PATH_MAX];
            if (realpath(file.c_str(), resolved) == nullptr || !seen_files.insert(resolved).second)
                continue;
            std::string real = resolved;
            const std::size_t so = real.rfind(".so.");
            json copy = {{"folder", pitfall::detail::valid_utf8(dir)},
                         {"file", pitfall::detail::valid_utf8(real)}};
            if (so != std::string::npos)
                copy["version"] = pitfall::detail::valid_utf8(real.substr(so + 4));
            by_soname[name].push_back(std::move(copy));
        }
    }
    json out = json::object();
    for (auto& [name, copies] : by_soname)
        out[name] = std::move(copies);
    return out;
}

} // namespace pitfall::probe
