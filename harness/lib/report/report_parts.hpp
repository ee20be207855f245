// What the report formats share, private to harness/lib/report: accessors that read untrusted
// JSON (a results.jsonl anyone may have edited) without throwing, number and verdict text, and
// escaping for Markdown and HTML. One definition each, in report_parts.cpp.
#pragma once

#include "doctor/doctor.hpp"
#include "judge/stats.hpp"
#include "model/model.hpp"
#include "report/report.hpp"
#include "run/run_folder.hpp"
#include "run/runner.hpp"

#include "pitfall/detail/json_file.hpp"
#include "pitfall/detail/json_schema.hpp"
#include "pitfall/detail/result_file.hpp"
#include "pitfall/detail/text.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstddef>
#include <map>
#include <string>
#include <vector>

namespace pitfall::runner::report_parts {

using json = nlohmann::json;

/// The parts one after another, built in one string (no temporaries per `+`).
template <class... Parts> std::string cat(const Parts&... parts) {
    std::string out;
    (out += ... += parts);
    return out;
}

inline constexpr const char* report_schema = "pitfall.report/1";

/// A member of `j` as text (another type as its JSON), or the fallback when `j` is not an
/// object, lacks it or holds null.
std::string str(const json& j, const char* key, const std::string& fallback = "");
json obj(const json& j, const char* key); ///< an object member, else {}
json arr(const json& j, const char* key); ///< an array member, else []
double num(const json& j, const char* key, double fallback = std::nan(""));

std::string fmt(const char* format, double x); ///< printf of one number
std::string human_bytes(double bytes);         ///< "1.5 GiB"
std::string human_seconds(double s);           ///< "12.3 ms"

bool has_severity(const std::string& verdict, verdict_severity severity);
bool is_warning(const std::string& verdict);
bool is_error(const std::string& verdict);
std::map<std::string, int> verdict_counts(const run_data& run);
/// The cases whose outcome is a prediction (counted apart, never as a reproduction).
std::vector<const json*> predictions(const run_data& run);
std::string outcome_line(const json& record); ///< the observed outcome in one line
bool run_failing(const run_data& run);        ///< any case with a failing verdict
json fingerprint_summary(const run_data& run);
/// `pitfall doctor`'s rules over the run's own fingerprint.
diagnosis machine_of(const run_data& run);

/// Text safe in one Markdown table cell or list line, cut at a word past `max` bytes.
std::string md_inline(std::string text, std::size_t max = 200);
/// Text for inside a Markdown `code span`.
std::string md_code(std::string text);

/// `run.dir`/flaky.json into run.flaky, or why not into run.flaky_problem.
void load_flaky(run_data& run);
/// The flaky cases in each report: report.json's "flaky" (null: no flaky.json; {"problem"}:
/// unreadable), the Markdown and HTML sections (empty when no case is flaky), and a case's
/// entry (nullptr when it is not flaky).
json flaky_report_json(const run_data& run);
std::string flaky_markdown(const run_data& run);
std::string flaky_html(const run_data& run);
const json* flaky_entry(const run_data& run, const std::string& key);

/// Cases that neither pass nor fail (UNSUPPORTED, NO_BASELINE, AMBIGUOUS, ...), grouped by
/// verdict, backend and cause in order of first appearance: `cause` is the sentence a report
/// prints once for the group (the machine's headline where it explains a CUDA skip).
struct quiet_group {
    std::string verdict;
    std::string backend;
    std::string key; ///< the observed error's name, else the reason
    std::string cause;
    std::vector<const json*> cases;
};
std::vector<quiet_group> quiet_groups(const run_data& run);

/// The CSS class of a verdict: pass, skip, warn or fail.
const char* verdict_class(const std::string& v);
/// The style sheet every HTML report carries inline.
extern const char* const html_style;

} // namespace pitfall::runner::report_parts
