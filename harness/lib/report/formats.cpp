#include "report/formats.hpp"

#include "pitfall/detail/text.hpp"

namespace pitfall::runner {

namespace {
std::string json_text(const nlohmann::json& document) {
    return document.dump(2) + "\n";
}
} // namespace

const std::vector<report_format>& report_formats() {
    // Markdown is read in terminals and rendered by forges that act on control characters and
    // bidirectional overrides: they are made visible once, over each whole document.
    static const std::vector<report_format> formats = {
        {"html", "HTML", report_html_name, render_html, render_matrix_html, render_fleet_html,
         false},
        {"junit", "JUnit XML", report_junit_name, render_junit, nullptr, nullptr, true},
        {"markdown", "Markdown", report_markdown_name,
         [](const run_data& run) { return detail::visible_controls(render_markdown(run)); },
         [](const std::vector<run_data>& runs) {
             return detail::visible_controls(render_matrix_markdown(runs));
         },
         [](const std::vector<run_data>& nodes) {
             return detail::visible_controls(render_fleet_markdown(nodes));
         },
         true},
        {"json", "JSON", report_json_name,
         [](const run_data& run) { return json_text(render_json(run)); }, nullptr,
         [](const std::vector<run_data>& nodes) { return json_text(render_fleet_json(nodes)); },
         true},
    };
    return formats;
}

const report_format* find_report_format(std::string_view name) {
    for (const auto& format : report_formats())
        if (name == format.name)
            return &format;
    return nullptr;
}

std::string report_format_names(bool (*has)(const report_format&)) {
    std::vector<const char*> names;
    for (const auto& format : report_formats())
        if (has == nullptr || has(format))
            names.push_back(format.name);
    std::string out;
    for (std::size_t i = 0; i < names.size(); ++i)
        out += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + std::string(names[i]);
    return out;
}

} // namespace pitfall::runner
