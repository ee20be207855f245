// The JUnit XML report, for CI systems.
#include "report/report_parts.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>

namespace pitfall::runner {
using namespace report_parts;
std::string render_junit(const run_data& run) {
    int failures = 0, errors = 0, skipped = 0;
    double total = 0;
    for (const auto& r : run.cases) {
        const std::string v = str(r, "verdict");
        if (is_error(v))
            ++errors;
        else if (r.value("failing", false))
            ++failures;
        else if (v == "UNSUPPORTED")
            ++skipped;
        total += num(obj(r, "process"), "wall_seconds", 0);
    }
    // Cases the run never finished are errors too: a CI system must not read them as passed.
    errors += static_cast<int>(run.not_finished.size());
    const int tests = static_cast<int>(run.cases.size() + run.not_finished.size());
    std::ostringstream x;
    const auto attr = [](const std::string& s) { return escape_markup(s); };
    const std::string counts = "tests=\"" + std::to_string(tests) + "\" failures=\"" +
                               std::to_string(failures) + "\" errors=\"" + std::to_string(errors) +
                               "\" skipped=\"" + std::to_string(skipped) + "\" time=\"" +
                               fmt("%.3f", total) + "\"";
    x << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
    x << "<testsuites name=\"pitfall\" " << counts << ">\n";
    x << "  <testsuite name=\"pitfall\" " << counts << " timestamp=\""
      << attr(str(run.header, "at")) << "\">\n";
    x << "    <properties>\n";
    x << "      <property name=\"pitfall.version\" value=\""
      << attr(str(run.header, "pitfall_version")) << "\"/>\n";
    x << "      <property name=\"fingerprint_id\" value=\""
      << attr(str(run.header, "fingerprint_id")) << "\"/>\n";
    x << "      <property name=\"profile\" value=\""
      << attr(str(obj(run.header, "profile"), "name")) << "\"/>\n";
    x << "      <property name=\"predictions\" value=\"" << predictions(run).size() << "\"/>\n";
    // Testcase-level properties are outside the Ant JUnit schema the CI readers follow (pytest
    // warns its record_property breaks validation): the suite names the flaky cases, and each
    // one's system-out gives its history.
    if (run.flaky.is_object() && !run.flaky["cases"].empty()) {
        std::string names;
        for (const auto& c : run.flaky["cases"])
            names += (names.empty() ? "" : " ") + c["case"].get<std::string>();
        x << "      <property name=\"flaky\" value=\"" << attr(names) << "\"/>\n";
    }
    if (!run.flaky_problem.empty())
        x << "      <property name=\"flaky.problem\" value=\""
          << attr("flaky.json unreadable: " + run.flaky_problem) << "\"/>\n";
    const json facts = fingerprint_summary(run);
    for (const auto& [k, v] : facts.items())
        x << "      <property name=\"fingerprint." << attr(k) << "\" value=\""
          << attr(v.is_string() ? v.get<std::string>() : v.dump()) << "\"/>\n";
    x << "    </properties>\n";
    for (const auto& r : run.cases) {
        const std::string v = str(r, "verdict");
        x << "    <testcase classname=\"" << attr(str(r, "scenario")) << "\" name=\""
          << attr(str(r, "backend") + "." + str(r, "variant")) << "\" time=\""
          << fmt("%.3f", num(obj(r, "process"), "wall_seconds", 0)) << "\">\n";
        const std::string message = v + ": " + str(r, "reason");
        if (is_error(v))
            x << "      <error type=\"" << attr(v) << "\" message=\"" << attr(message) << "\">"
              << escape_markup(str(r, "output_tail")) << "</error>\n";
        else if (r.value("failing", false))
            x << "      <failure type=\"" << attr(v) << "\" message=\"" << attr(message) << "\">"
              << escape_markup("observed " + outcome_line(r) + "\n" + str(r, "reason"))
              << "</failure>\n";
        else if (v == "UNSUPPORTED")
            x << "      <skipped message=\"" << attr(str(r, "reason")) << "\"/>\n";
        const std::string why = str(r, "prediction");
        const json* flaky = flaky_entry(run, str(r, "case"));
        x << "      <system-out>"
          << escape_markup(v + " (" + outcome_line(r) + "): " + str(r, "reason") +
                           (why.empty() ? "" : "\nprediction, not a reproduction: " + why) +
                           (flaky == nullptr
                                ? ""
                                : "\nflaky per the history database: " + flaky_summary(*flaky)))
          << "</system-out>\n";
        x << "    </testcase>\n";
    }
    const std::set<std::string> crashed(run.started_unfinished.begin(),
                                        run.started_unfinished.end());
    for (const auto& key : run.not_finished) {
        const auto first = key.find('.');
        const auto second = key.find('.', first + 1);
        const std::string scenario = key.substr(first + 1, second - first - 1);
        const std::string name = key.substr(0, first) + "." + key.substr(second + 1);
        const std::string why = crashed.count(key) != 0
                                    ? "the run ended while this case ran (no result recorded)"
                                    : "not run: the run ended before it";
        x << "    <testcase classname=\"" << attr(scenario) << "\" name=\"" << attr(name)
          << "\" time=\"0\">\n"
          << "      <error type=\"NOT_RUN\" message=\"" << attr(why) << "\"/>\n"
          << "    </testcase>\n";
    }
    x << "  </testsuite>\n</testsuites>\n";
    return x.str();
}

} // namespace pitfall::runner
