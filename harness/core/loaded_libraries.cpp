#include "pitfall/detail/loaded_libraries.hpp"

#include "pitfall/detail/text.hpp"

#include <climits>
#include <cstdlib>
#include <fstream>
#include <link.h>
#include <set>
#include <sstream>

namespace pitfall::detail {

std::string version_from_file_name(const std::string& file_name) {
    const std::size_t so = file_name.find(".so.");
    if (so == std::string::npos)
        return {};
    const std::string tail = file_name.substr(so + 4);
    // Dotted numbers only: "13.0.96", never "1a" or "9..1" (a name someone made up).
    bool digit_before = false;
    for (const char c : tail) {
        if (c >= '0' && c <= '9') {
            digit_before = true;
        } else if (c == '.' && digit_before) {
            digit_before = false;
        } else {
            return {};
        }
    }
    return digit_before ? tail : std::string();
}

std::string watched_library_name(const std::string& file_name) {
    const std::size_t so = file_name.find(".so");
    if (so == std::string::npos || so == 0)
        return {};
    const std::string after = file_name.substr(so + 3);
    if (!after.empty() && after.front() != '.')
        return {}; // libfoo.sox: not a shared library's name
    std::string name = file_name.substr(0, so);
    // libcuda exactly (its prefix is every other CUDA library's); the rest by family:
    // libcudnn_ops, libnvrtc-builtins, a wheel's libcudart-<hash>.
    if (name == "libcuda")
        return name;
    for (const char* family :
         {"libcudart", "libcublas", "libcudnn", "libnvrtc", "libnvidia-ptxjitcompiler"})
        if (name.rfind(family, 0) == 0)
            return name;
    return {};
}

namespace {
/// The path field of one maps line: after five whitespace-separated fields, the rest of the
/// line less its leading blanks (a path may hold spaces). "" where there is none.
std::string maps_path(const std::string& line) {
    std::size_t at = 0;
    for (int field = 0; field < 5; ++field) {
        at = line.find_first_not_of(" \t", at);
        if (at == std::string::npos)
            return {};
        at = line.find_first_of(" \t", at);
        if (at == std::string::npos)
            return {};
    }
    at = line.find_first_not_of(" \t", at);
    return at == std::string::npos ? std::string() : line.substr(at);
}

std::string base_name(const std::string& path) {
    const std::size_t slash = path.rfind('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
}
} // namespace

std::vector<loaded_library>
parse_loaded_libraries(const std::string& maps_text,
                       const std::function<std::string(const std::string&)>& resolve,
                       const std::map<std::string, std::string>& loader_names) {
    std::vector<loaded_library> out;
    std::set<std::string> seen;
    std::istringstream in(maps_text);
    for (std::string line; std::getline(in, line);) {
        const std::string path = maps_path(line);
        if (path.empty() || path.front() != '/' || !seen.insert(path).second)
            continue;
        const std::string name = watched_library_name(base_name(path));
        if (name.empty())
            continue;
        std::string real = resolve ? resolve(path) : std::string();
        if (real.empty())
            real = path;
        const auto named = loader_names.find(real);
        const std::string& asked = named != loader_names.end() ? named->second : path;
        std::string version = version_from_file_name(base_name(real));
        if (version.empty()) // a copy that is no symlink may still carry it in its own name
            version = version_from_file_name(base_name(asked));
        out.push_back({name, valid_utf8(asked), valid_utf8(real), version});
    }
    return out;
}

namespace {
std::string real_path_of(const std::string& path) {
    char resolved[PATH_MAX];
    return ::realpath(path.c_str(), resolved) != nullptr ? std::string(resolved) : std::string();
}

/// Real path -> the name the loader opened it by, for every object it loaded.
std::map<std::string, std::string> names_the_loader_used() {
    std::vector<std::string> names;
    dl_iterate_phdr(
        [](struct dl_phdr_info* info, size_t, void* data) {
            if (info->dlpi_name != nullptr && info->dlpi_name[0] == '/')
                static_cast<std::vector<std::string>*>(data)->emplace_back(info->dlpi_name);
            return 0;
        },
        &names);
    std::map<std::string, std::string> by_real;
    for (const auto& name : names)
        if (!watched_library_name(base_name(name)).empty())
            if (std::string real = real_path_of(name); !real.empty())
                by_real.emplace(std::move(real), name);
    return by_real;
}
} // namespace

std::vector<loaded_library> read_loaded_libraries() {
    std::ifstream in("/proc/self/maps");
    if (!in)
        return {};
    std::ostringstream text;
    text << in.rdbuf();
    return parse_loaded_libraries(text.str(), real_path_of, names_the_loader_used());
}

nlohmann::json loaded_libraries_json(const std::vector<loaded_library>& libraries) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& l : libraries)
        out.push_back({{"name", l.name},
                       {"path", l.path},
                       {"real_path", l.real_path},
                       {"version", l.version}});
    return out;
}

} // namespace pitfall::detail
