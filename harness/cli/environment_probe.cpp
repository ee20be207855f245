#include "environment_probe.hpp"

#include <cstdlib>
#include <utility>

#include <unistd.h>

namespace pitfall::cli {

pitfall::status_or<probe_location> locate_probe(const std::string& index_flag) {
    probe_location found;
    found.probe = runner::self_executable();
    found.probe = found.probe.substr(0, found.probe.rfind('/') + 1) + "pitfall-probe";
    auto at = runner::locate(index_flag);
    if (!at.is_ok()) {
        if (!index_flag.empty())
            return at.error();
        return found;
    }
    if (!at->probe.empty())
        found.probe = at->probe;
    found.installation = std::move(at.value());
    return found;
}

temporary_folder::temporary_folder() {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern =
        std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/pitfall-doctor-XXXXXX";
    if (::mkdtemp(pattern.data()) != nullptr)
        path = pattern;
}

temporary_folder::~temporary_folder() {
    if (path.empty())
        return;
    ::unlink((path + "/probe.log").c_str());
    ::rmdir(path.c_str());
}

} // namespace pitfall::cli
