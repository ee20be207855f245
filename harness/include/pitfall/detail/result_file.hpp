// pitfall/result_file.hpp: the result document and safe file writes, shared by scenarios and
// the harness.
#pragma once

#include "pitfall/status.hpp"

#include <nlohmann/json.hpp>

#include <string>

namespace pitfall {

/// Version of the result document a scenario writes (`"schema"` field).
inline constexpr const char* result_schema = "pitfall.result/1";

/// {"status": "ok"} | {"status": "unsupported", "reason"} |
/// {"status": "error", "library", "error", "stage", "sticky", "message", "where"}.
nlohmann::json outcome_to_json(const status& s);

/// A case's result file as the harness takes it: a regular file of JSON (detail::read_json_file)
/// that reports/schema/result.schema.json accepts; otherwise why not, naming the file. The one
/// reader of result files: the runner and its fuzz target call it.
status_or<nlohmann::json> read_result_file(const std::string& path);

/// Writes `text` to a temporary file beside `path`, flushes it, then renames it over `path`:
/// readers see the old file or the whole new one, never half of it.
status write_file_atomically(const std::string& path, const std::string& text);
/// The same with the file's mode exactly `mode`, the umask left out: for a file that another
/// user's daemon reads (node_exporter's textfile collector reads `pitfall export --out`).
status write_file_atomically(const std::string& path, const std::string& text, unsigned mode);

} // namespace pitfall
