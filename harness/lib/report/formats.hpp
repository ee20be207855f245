// The report formats, one list: `pitfall run` writes each into the run folder, `pitfall report
// --format NAME` renders one, and the command line checks --format and lists the names in its
// help from it. A new format is one file with its renderers plus one line in formats.cpp.
#pragma once

#include "report/report.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace pitfall::runner {

struct report_format {
    const char* name;      ///< --format NAME
    const char* title;     ///< as a sentence names it: "HTML", "JUnit XML"
    const char* file_name; ///< the file `pitfall run` writes into the run folder
    /// One run, as the text written (Markdown's control characters already made visible).
    std::string (*render_run)(const run_data&);
    /// Runs or matrix cells side by side (`report --merge`); null when the format has none.
    std::string (*render_matrix)(const std::vector<run_data>&);
    /// Fleet node folders side by side; null when the format has none.
    std::string (*render_fleet)(const std::vector<run_data>&);
    /// False for a page meant for a browser: `pitfall report` does not pour it into a terminal.
    bool for_terminal;
};

/// Every format, in the order `pitfall run` names the files it wrote.
const std::vector<report_format>& report_formats();
/// The format called `name`, or null.
const report_format* find_report_format(std::string_view name);
/// The names of the formats `has` holds for, as a list for a message: "html, junit, markdown or
/// json".
std::string report_format_names(bool (*has)(const report_format&) = nullptr);

} // namespace pitfall::runner
