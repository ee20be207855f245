// A run folder or a gate document (`pitfall gate --json`, pitfall.gate/1) as Prometheus metrics
// in the text exposition format 0.0.4, the format node_exporter's textfile collector reads:
// verdict counts, each case's verdict and outcome, the doctor's findings by severity, the
// gate's verdicts per node and per GPU, when it ran, and the fingerprint as an info metric.
// `pitfall export --openmetrics` writes it; docs/metrics.md lists every family.
//
// What comes from the input is bounded: a label value is valid UTF-8 without control
// characters, at most metrics_label_max_bytes before escaping; an input with more than
// metrics_max_cases cases is refused (the catalog, which bounds a real run, holds about 200).
//
//   PITFALL_ASSIGN_OR_RETURN(const std::string text, pitfall::runner::metrics_of(path));
#pragma once

#include "report/report.hpp"

#include "pitfall/status.hpp"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <string>
#include <string_view>

namespace pitfall::runner {

/// The longest label value written, in bytes before escaping. A longer one is cut on a
/// character boundary and ends in "~" and 16 hex digits of a hash of the whole value, so two
/// long values that share their start stay two series.
inline constexpr std::size_t metrics_label_max_bytes = 128;
/// The most cases one export carries (a gate counts each case once per GPU): each is two
/// series, so a file stays a few thousand series whatever the input holds.
inline constexpr std::size_t metrics_max_cases = 4096;
/// The most doctor findings a gate document may list (the doctor has a few dozen rules).
inline constexpr std::size_t metrics_max_findings = 256;
/// The schema a gate document names.
inline constexpr const char* gate_schema_name = "pitfall.gate/1";

/// `text` as a label value between the double quotes: invalid UTF-8 and control characters
/// replaced by U+FFFD (newline excepted), cut as metrics_label_max_bytes says, then backslash,
/// double quote and newline escaped (\\, \", \n).
std::string metrics_label_value(std::string_view text);

/// Whether `name` is a valid label name: [a-zA-Z_][a-zA-Z0-9_]*, not starting with "__"
/// (reserved for Prometheus itself).
bool valid_metrics_label_name(std::string_view name);

/// A run's metrics (what load_run read); bad input where it has more than metrics_max_cases.
status_or<std::string> render_run_metrics(const run_data& run);

/// A gate document's metrics. `name` (its path) heads every error: a document that
/// reports/schema/gate.schema.json refuses, or one past the caps, is bad input.
status_or<std::string> render_gate_metrics(const nlohmann::json& gate, const std::string& name);

/// The metrics of `path`, told apart by content: a folder is a run folder (read as `pitfall
/// report` reads it), a file a gate document ("schema": "pitfall.gate/1"). Anything else (a
/// folder without results.jsonl, another JSON document, not JSON, a FIFO, a device) is bad
/// input naming `path`.
status_or<std::string> metrics_of(const std::string& path);

} // namespace pitfall::runner
