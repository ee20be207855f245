// Reading facts out of a JSON document that may lack them (a probe that could not learn a fact,
// a record written by an older pitfall): a member that is absent, or a parent that is not an
// object, reads as null, never as an exception.
#pragma once

#include <nlohmann/json.hpp>

namespace pitfall::runner {

/// j[key] where j is an object holding key; else a null that lives as long as the program.
inline const nlohmann::json& member(const nlohmann::json& j, const char* key) {
    static const nlohmann::json none;
    if (!j.is_object())
        return none;
    const auto it = j.find(key);
    return it != j.end() ? *it : none;
}

} // namespace pitfall::runner
