// mutate.hpp: mutants of a case's own records, to prove that its baseline notices when a check
// stops checking (PITFALL_MUTATE; bench/mutation_score.py runs them).
//
// Inert unless PITFALL_MUTATE is set. Its value is a list of `kind:case:argument`, separated by
// commas; `case` is the harness's case key (`cpu.float64_inputs.remedy`) or `*`:
//
//   force_pass:<case>:<check>              the check is recorded as passed, whatever it found
//   drop_check:<case>:<check>              the check is not recorded at all
//   drop_measurement:<case>:<name>         the measurement is not recorded
//   scale_measurement:<case>:<name>=<f>    the measurement reads f times its value
//   drop_event:<case>:<name>               the library outcome is not recorded
//
// The mutants act on the result document as the case wrote it, never on the case's work: what
// they prove is what the judge makes of the records. The result lists them under "injected",
// like PITFALL_INJECT's faults, so a mutated run never passes for a real one and `pitfall bless`
// refuses it. A mutant whose name the case did not record says so there ("(not recorded)").
#pragma once

#include "pitfall/status.hpp"

#include <nlohmann/json.hpp>

#include <map>
#include <set>
#include <string>
#include <vector>

namespace pitfall::mutate {

inline constexpr const char* env_name = "PITFALL_MUTATE";

struct plan {
    std::set<std::string> forced_checks;
    std::set<std::string> dropped_checks;
    std::set<std::string> dropped_measurements;
    std::map<std::string, double> scaled_measurements;
    std::set<std::string> dropped_events;
    std::vector<std::string> items; ///< each mutant as given, for the result

    bool empty() const { return items.empty(); }
};

/// The mutants of PITFALL_MUTATE that name `case_key` (or `*`). A malformed value is a
/// bad_parameter error naming the variable and the item.
status_or<plan> parse(const std::string& value, const std::string& case_key);

/// The whole of PITFALL_MUTATE checked before a run starts: each item well formed, of a known
/// kind, aimed at `*` or at one of `case_keys`.
status validate(const std::string& value, const std::set<std::string>& case_keys);

/// The plan of the running case (set once by the scenario's main before the case starts).
const plan& active();
void set_active(plan p);

/// The mutants applied to a result document's checks, measurements and events; each one, and
/// whether the case had recorded what it names, appended to the document's "injected".
void apply(const plan& p, nlohmann::json& result);

} // namespace pitfall::mutate
