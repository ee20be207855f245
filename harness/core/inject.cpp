#include "pitfall/detail/inject.hpp"
#include "pitfall/detail/env_items.hpp"
#include "pitfall/memory.hpp"

#include <cmath>
#include <cstdlib>
#include <set>
#include <sstream>

namespace pitfall::inject {
namespace {
plan g_active;

status bad(const std::string& item, const std::string& what) {
    return status::error(pitfall_error::bad_parameter,
                         std::string(env_name) + ": '" + item + "': " + what, stage::init);
}

} // namespace

namespace {
/// One item of the list, read and checked; `target` is a case key or "*".
struct item_plan {
    std::string target;
    plan effect;
};

status_or<item_plan> parse_item(const std::string& item) {
    // The argument may hold colons of its own (none do today); split on the first two.
    const auto first = item.find(':');
    const auto second = first == std::string::npos ? std::string::npos : item.find(':', first + 1);
    if (second == std::string::npos)
        return bad(item, "expected kind:case:argument");
    const std::string kind = item.substr(0, first);
    const std::string target = item.substr(first + 1, second - first - 1);
    const std::string arg = item.substr(second + 1);
    if (target.empty() || arg.empty())
        return bad(item, "expected kind:case:argument");
    item_plan out{target, {}};
    plan& p = out.effect;
    if (kind == "slowdown") {
        char* end = nullptr;
        const double f = std::strtod(arg.c_str(), &end);
        if (end == arg.c_str() || *end != '\0' || !std::isfinite(f) || f < 1.0 || f > 1e6)
            return bad(item, "a slowdown is a factor in [1, 1e6] (1.2 = 20% slower)");
        p.slowdown = f;
        p.applied.push_back("slowdown x" + arg);
    } else if (kind == "extra_device_bytes") {
        const auto bytes = parse_byte_size(arg);
        if (!bytes)
            return bad(item, "expected a byte count (4096, 64K, 4M, 1G)");
        p.extra_device_bytes = *bytes;
        p.applied.push_back("extra_device_bytes " + std::to_string(*bytes));
    } else if (kind == "outcome") {
        p.outcome_error = arg;
        p.applied.push_back("outcome " + arg);
    } else {
        return bad(item, "unknown kind '" + kind + "' (slowdown, extra_device_bytes, outcome)");
    }
    return out;
}
} // namespace

status_or<plan> parse(const std::string& value, const std::string& case_key) {
    plan p;
    for (const std::string& item : detail::env_items(value)) {
        if (item.empty())
            continue;
        PITFALL_ASSIGN_OR_RETURN(item_plan one, parse_item(item));
        if (one.target != "*" && one.target != case_key)
            continue; // validated, aimed at another case
        p.slowdown *= one.effect.slowdown;
        p.extra_device_bytes += one.effect.extra_device_bytes;
        if (!one.effect.outcome_error.empty())
            p.outcome_error = one.effect.outcome_error;
        for (auto& applied : one.effect.applied)
            p.applied.push_back(std::move(applied));
    }
    return p;
}

status validate(const std::string& value, const std::set<std::string>& case_keys) {
    return detail::validate_env_items(
        env_name, value, case_keys, [](const std::string& item) -> status_or<std::string> {
            PITFALL_ASSIGN_OR_RETURN(const item_plan one, parse_item(item));
            return one.target;
        });
}

const plan& active() {
    return g_active;
}
void set_active(plan p) {
    g_active = std::move(p);
}

status injected_outcome(const status& own, const std::string& error_name) {
    library lib = library::host;
    if (error_name.rfind("cuda", 0) == 0)
        lib = library::cuda_runtime;
    else if (error_name.rfind("CUBLAS_", 0) == 0)
        lib = library::cublas;
    else if (error_name.rfind("CUDNN_", 0) == 0)
        lib = library::cudnn;
    else if (error_name.rfind("nccl", 0) == 0)
        lib = library::nccl;
    const stage where = own.is_ok() || own.is_unsupported() ? stage::compute : own.where();
    const bool sticky = lib == library::cuda_runtime && is_sticky_cuda_error(error_name);
    return status::as_reported(lib, error_name, std::string("injected by ") + env_name, where,
                               sticky);
}

} // namespace pitfall::inject
