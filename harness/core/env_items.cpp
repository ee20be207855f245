#include "pitfall/detail/env_items.hpp"

#include <sstream>

namespace pitfall::detail {

std::vector<std::string> env_items(const std::string& value) {
    std::vector<std::string> out;
    std::string item;
    std::istringstream in(value);
    while (std::getline(in, item, ','))
        out.push_back(item);
    return out;
}

status
validate_env_items(const char* env_name, const std::string& value,
                   const std::set<std::string>& case_keys,
                   const std::function<status_or<std::string>(const std::string&)>& target_of) {
    const auto bad = [&](const std::string& item, const std::string& what) {
        return status::error(pitfall_error::bad_parameter,
                             std::string(env_name) + ": '" + item + "': " + what, stage::init);
    };
    bool any = false;
    for (const std::string& item : env_items(value)) {
        if (item.empty())
            return bad(value, "an empty item (two commas, or one at an end)");
        PITFALL_ASSIGN_OR_RETURN(const std::string target, target_of(item));
        if (target != "*" && case_keys.count(target) == 0)
            return bad(item, "no case '" + target +
                                 "' (a case key as `pitfall list` names it without "
                                 "'pitfall.', or *)");
        any = true;
    }
    if (!any)
        return bad(value, "set but names nothing (unset it, or give kind:case:argument)");
    return status::ok();
}

} // namespace pitfall::detail
