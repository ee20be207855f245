// "did you mean ...": the nearest known name to a mistyped one (a command, a flag, a scenario).
#pragma once

#include <string>
#include <vector>

namespace pitfall::runner {

/// Edit distance: an insertion, a deletion, a substitution or a swap of neighbours counts one.
std::size_t edit_distance(const std::string& a, const std::string& b);

/// The known name nearest to `word` when it is near enough to be a typo (at most a third of
/// its letters changed, or `word` the start of a name), else empty. Ties go to the first.
std::string nearest_name(const std::string& word, const std::vector<std::string>& known);

/// " (did you mean 'x'?)" for the nearest known name, or "" when none is near.
std::string did_you_mean(const std::string& word, const std::vector<std::string>& known);

} // namespace pitfall::runner
