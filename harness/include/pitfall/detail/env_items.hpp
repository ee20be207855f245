// The `kind:case:argument` lists of PITFALL_INJECT and PITFALL_MUTATE: their items, and the
// rules a whole list meets before a run starts (one definition for both variables).
#pragma once

#include "pitfall/status.hpp"

#include <functional>
#include <set>
#include <string>
#include <vector>

namespace pitfall::detail {

/// The comma-separated items of a list variable, empty ones included (validation refuses them).
std::vector<std::string> env_items(const std::string& value);

/// A whole list checked: no empty item; each read by `target_of` (the case it is aimed at, or
/// the item's own error); each aimed at `*` or at one of `case_keys` (a typo must not leave a
/// run unaltered); at least one item. A bad_parameter error naming the variable and the item.
status
validate_env_items(const char* env_name, const std::string& value,
                   const std::set<std::string>& case_keys,
                   const std::function<status_or<std::string>(const std::string&)>& target_of);

} // namespace pitfall::detail
