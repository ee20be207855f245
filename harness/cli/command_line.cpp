// The pieces every command's file shares: error messages, flag parsers, option groups and the
// checks of what a parse left over.
#include "command_line.hpp"

#include "util/suggest.hpp"

#include <algorithm>
#include <cmath>
#include <exception>
#include <iostream>
#include <type_traits>
#include <utility>

namespace pitfall::cli {

int usage_error(const std::string& what, const std::string& command) {
    std::cerr << "pitfall: error: " << what << " (see `pitfall help" << (command.empty() ? "" : " ")
              << command << "`)\n";
    return exit_bad_input;
}

int input_error(const pitfall::status& s) {
    std::cerr << "pitfall: error: " << s.message() << '\n';
    return exit_bad_input;
}

std::optional<std::string> split_commas(std::vector<std::string>& values, const std::string& flag) {
    std::vector<std::string> out;
    for (const auto& value : values)
        for (std::size_t start = 0; start <= value.size();) {
            const std::size_t comma = std::min(value.find(',', start), value.size());
            if (comma == start) {
                std::string why = flag;
                why += " '" + value + "': an empty ";
                return why + (value.empty() ? "value" : "item");
            }
            out.push_back(value.substr(start, comma - start));
            start = comma + 1;
        }
    values = std::move(out);
    return std::nullopt;
}

std::optional<std::string> split_filter(runner::case_filter& filter) {
    for (const auto& [flag, values] :
         {std::pair{"--scenario", &filter.scenarios}, std::pair{"--backend", &filter.backends},
          std::pair{"--variant", &filter.variants}, std::pair{"--label", &filter.labels}})
        if (auto bad = split_commas(*values, flag))
            return bad;
    return std::nullopt;
}

namespace {
/// The whole of `text` as an int or a double: "12x", "" and out-of-range values are refused.
template <class T> bool parse_whole(const std::string& text, T& out) {
    try {
        std::size_t used = 0;
        if constexpr (std::is_same_v<T, int>)
            out = std::stoi(text, &used);
        else
            out = std::stod(text, &used);
        return used == text.size();
    } catch (const std::exception&) {
        return false;
    }
}
} // namespace

bool parse_samples(const std::string& text, std::optional<int>& out) {
    int n = 0; // the bound of every scenario's built-in `samples`
    if (!parse_whole(text, n) || n < 1 || n > 100001 || n % 2 == 0)
        return false;
    out = n;
    return true;
}
bool parse_jobs(const std::string& text, int& out) {
    int n = 0;
    if (!parse_whole(text, n) || n < 1 || n > 256)
        return false;
    out = n;
    return true;
}
bool parse_exit_code(const std::string& text, std::optional<int>& out) {
    int n = 0;
    if (!parse_whole(text, n) || n < 0 || n > 255)
        return false;
    out = n;
    return true;
}
bool parse_fraction(const std::string& text, double& out) {
    double x = 0;
    if (!parse_whole(text, x) || !(x >= 0 && x < 1))
        return false;
    out = x;
    return true;
}
bool parse_level(const std::string& text, double& out) {
    double x = 0;
    if (!parse_whole(text, x) || !(x > 0 && x < 1))
        return false;
    out = x;
    return true;
}
bool parse_timings_mode(const std::string& text, bool& judge) {
    if (text != "judge" && text != "record")
        return false;
    judge = text == "judge";
    return true;
}
bool parse_correction(const std::string& text, runner::timing_correction& out) {
    const auto c = runner::timing_correction_from_string(text);
    if (!c)
        return false;
    out = *c;
    return true;
}
bool parse_scale(const std::string& text, double& out) {
    double x = 0; // nan and inf are refused too: a timeout must end
    if (!parse_whole(text, x) || !std::isfinite(x) || !(x > 0 && x <= 1000))
        return false;
    out = x;
    return true;
}
bool parse_ratio_tolerance(const std::string& text, double& out) {
    double x = 0;
    if (!parse_whole(text, x) || !std::isfinite(x) || !(x > 1 && x <= 1000))
        return false;
    out = x;
    return true;
}
bool parse_pause(const std::string& text, double& out) {
    double x = 0;
    if (!parse_whole(text, x) || !(x >= 0 && x <= 600))
        return false;
    out = x;
    return true;
}

void add_locations(CLI::App& sub, command_line& cl, bool used) {
    const std::string group = used ? "Locations" : "";
    sub.add_option("--index", cl.index_flag,
                   "scenario index (default: $PITFALL_INDEX, else the one beside\n"
                   "this program: <bin>/../pitfall-index.json, <bin>/../share/pitfall/)")
        ->type_name("FILE")
        ->group(group);
    sub.add_option("--expected", cl.expected_flag,
                   "baselines (default: $PITFALL_EXPECTED, else the index's\n"
                   "paths.expected)")
        ->type_name("DIR")
        ->group(group);
}

std::string case_key_from_user(std::string name) {
    if (name.rfind("pitfall.", 0) == 0 && std::count(name.begin(), name.end(), '.') == 3)
        name.erase(0, 8);
    return name;
}

void add_filter(CLI::App& sub, const std::string& flag, std::vector<std::string>& into,
                const std::string& metavar, const std::string& help) {
    sub.add_option(flag, into, help + " (repeatable, or comma-separated)")
        ->type_name(metavar)
        ->allow_extra_args(false)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
        ->group("Filters");
}

void add_filters(CLI::App& sub, runner::case_filter& filter) {
    add_filter(sub, "--scenario", filter.scenarios, "S", "only these scenarios");
    add_filter(sub, "--backend", filter.backends, "cpu|cuda", "only these backends");
    add_filter(sub, "--variant", filter.variants, "V", "only these variants");
    add_filter(sub, "--label", filter.labels, "L", "only cases with every label given");
}

std::vector<std::string> command_names(const CLI::App& app) {
    std::vector<std::string> names;
    for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
        names.push_back(sub->get_name());
    return names;
}

int reject_leftovers(const CLI::App& sub) {
    const std::vector<std::string> left = sub.remaining();
    if (left.empty())
        return exit_ok;
    const std::string& first = left.front();
    const std::string& command = sub.get_name();
    if (first.size() < 2 || first[0] != '-')
        return usage_error("unexpected argument '" + first + "' for `pitfall " + command + "`",
                           command);
    std::vector<std::string> known;
    for (const CLI::Option* opt : sub.get_options())
        for (const auto& name : opt->get_lnames())
            known.push_back("--" + name);
    const std::string flag = first.substr(0, first.find('='));
    return usage_error("unknown option '" + flag + "' for `pitfall " + command + "`" +
                           runner::did_you_mean(flag, known),
                       command);
}

int reject_empty_values(const CLI::App& sub) {
    for (const CLI::Option* opt : sub.get_options()) {
        if (opt->get_expected_max() == 0 || opt->count() == 0 || opt->get_positional())
            continue;
        for (const auto& value : opt->results())
            if (value.empty())
                return usage_error(opt->get_name() + ": an empty value", sub.get_name());
    }
    return exit_ok;
}

} // namespace pitfall::cli
