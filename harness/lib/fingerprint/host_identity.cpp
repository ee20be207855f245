// The host identity (host_identity.hpp).
#include "fingerprint/host_identity.hpp"
#include "util/json_member.hpp"

#include "util/fnv1a.hpp"

#include "pitfall/detail/json_file.hpp"

#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

namespace pitfall::runner {
using nlohmann::json;

namespace {
bool is_id(const std::string& text) {
    if (text.size() != 16)
        return false;
    for (const char c : text)
        if (!std::isxdigit(static_cast<unsigned char>(c)) ||
            std::isupper(static_cast<unsigned char>(c)))
            return false;
    return true;
}

/// The first line of a small file, bounded: /etc/machine-id is 33 bytes; a FIFO or a device put
/// in its place yields at most that much, never a hang on a file that never ends.
std::string first_line(const char* path) {
    std::ifstream in(path);
    std::string line;
    if (in && std::getline(in, line) && line.size() <= 256)
        return line;
    return "";
}

/// The first processor's value of `key` in /proc/cpuinfo ("stepping", "microcode", "flags").
std::string cpuinfo_value(const std::string& key) {
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line)) {
        const auto colon = line.find(':');
        if (colon == std::string::npos)
            continue;
        std::string name = line.substr(0, colon);
        while (!name.empty() && std::isspace(static_cast<unsigned char>(name.back())))
            name.pop_back();
        if (name == key) {
            std::string value = line.substr(colon + 1);
            const auto start = value.find_first_not_of(' ');
            return start == std::string::npos ? "" : value.substr(start);
        }
    }
    return "";
}

} // namespace

json host_identity(const json& fingerprint) {
    json parts = json::object();
    json missing = json::array();
    const std::string machine_id = first_line("/etc/machine-id");
    if (machine_id.empty())
        missing.push_back("/etc/machine-id");
    else
        parts["machine_id"] = fnv1a_hex("machine-id:" + machine_id);
    json uuids = json::array();
    const json& devices = member(member(member(fingerprint, "libraries"), "nvml"), "devices");
    if (devices.is_array())
        for (const auto& d : devices)
            if (const json& u = member(d, "uuid"); u.is_string())
                uuids.push_back(u);
    parts["gpu_uuids"] = uuids;
    const json& model = member(member(fingerprint, "host"), "cpu_model");
    const std::string flags = cpuinfo_value("flags");
    parts["cpu"] = {{"model", model.is_string() ? model : json("")},
                    {"stepping", cpuinfo_value("stepping")},
                    {"microcode", cpuinfo_value("microcode")},
                    {"flags", flags.empty() ? std::string() : fnv1a_hex(flags)}};
    json identity = {{"parts", parts}, {"from", "machine"}};
    identity["id"] = fnv1a_hex(detail::dump_safe(parts));
    if (!missing.empty())
        identity["missing"] = missing;
    if (const char* named = std::getenv(host_id_env); named != nullptr && *named != '\0') {
        const std::string text = detail::valid_utf8(named);
        identity["id"] = is_id(text) ? text : fnv1a_hex("named:" + text);
        identity["from"] = host_id_env;
    }
    return identity;
}

std::string host_id_of(const json& fingerprint) {
    const json& id = member(member(member(fingerprint, "host"), "identity"), "id");
    return id.is_string() ? id.get<std::string>() : "";
}

} // namespace pitfall::runner
