// pitfall/manifest.hpp: scenario.json, the one description of a scenario.
//
// Read by CMake (to register the CTest tests), compiled into the scenario program (for --list,
// parameter defaults and checks) and read by the harness (to list and run cases). Every error
// names the file and the field, or the line and column for malformed JSON.
//
//   auto m = pitfall::parse_manifest(text, "scenarios/float64_inputs/scenario.json");
//   if (!m.is_ok()) std::cerr << m.error().message() << '\n';
#pragma once

#include "pitfall/status.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pitfall {

// NOLINTNEXTLINE(bugprone-exception-escape): the implicit members of its nlohmann::json field
struct param_spec {
    std::string name;
    nlohmann::json default_value; ///< number or string; the type a value must parse as
    std::string doc;
    nlohmann::json min;     ///< null, or the smallest value allowed (numbers)
    nlohmann::json max;     ///< null, or the largest
    nlohmann::json choices; ///< null, or an array: the only values allowed
    /// null, or the value of the full parameter set (`pitfall run --full`, a program's `--full`):
    /// the default is the quick set CTest and plain runs use, sized to keep the suite short.
    nlohmann::json full_value;
};

/// What bounds a timed series ("timings" in scenario.json, for the scenario or one variant):
/// the calibration control (pitfall/controls.hpp) it is normalised by on each backend, and why.
/// A baseline keeps the series divided by that control's median from the same process, and
/// judges it so on every host of its profile; absolute times only on the host that blessed them.
struct timing_spec {
    std::string series;
    std::map<std::string, std::string> bound_by; ///< backend -> control ("host_blas")
    std::string why;
};

// NOLINTNEXTLINE(bugprone-exception-escape): the implicit members of its nlohmann::json field
struct variant_spec {
    std::string name;
    std::string kind; ///< "reproduce" | "remedy" | "probe"
    std::string doc;
    std::vector<std::string> labels;
    std::vector<std::string> backends; ///< subset of the scenario's; empty = all
    bool needs_device = true;          ///< false: the CUDA case runs even where no GPU answers
    bool helper = false; ///< a role another case starts with run_self(): no case of its own
    /// A gate case (`pitfall gate`): fast, judged by its outcome, run on every GPU of a node
    /// before work lands on it. Its CUDA case carries the label "gate".
    bool gate = false;
    /// A named parameter set: values this variant runs with instead of the scenario's defaults
    /// (each a declared parameter, of its type, within its bounds); `--param` still wins.
    nlohmann::json params = nlohmann::json::object();
    std::string param_set; ///< the set's name for reports ("seed_1000_features"); "" without one
    /// The cores the case occupies: the harness sets the BLAS and OpenMP thread counts of its
    /// process to this (1 unless the variant asks for more, saying why in `threads_why`), and
    /// `pitfall run --jobs` reserves that many of its slots for it.
    int threads = 1;
    std::string threads_why;
    /// Backend -> why: where this reproduce case predicts its failure from a rule or table
    /// instead of showing it (scenario.json "prediction"); counted apart from reproductions.
    std::map<std::string, std::string> prediction;
    /// The measurement this variant sizes its device memory from ("budget_bytes": the device's
    /// total, or free, memory): its tracked peak bytes follow the device, so `pitfall bless`
    /// records them as a fraction of that measurement, not as an exact count. "" for a variant
    /// whose allocations are its parameters' alone.
    std::string memory_per;
    /// Timed series whose bound differs for this variant from the scenario's "timings" (batch 1
    /// is launch-bound, batch 256 compute-bound); searched first.
    std::vector<timing_spec> timings;
};

/// A source that must NOT compile, and the compiler diagnostic that proves why (a CTest test).
struct compile_check_spec {
    std::string name;
    std::string source;     ///< relative to the scenario folder
    std::string diagnostic; ///< a regular expression the compiler's output must match
};

/// A timing ratio between two variants of one backend, computed by the harness per run.
struct ratio_spec {
    std::string name;
    std::string numerator;   ///< variant
    std::string denominator; ///< variant
    std::string samples;     ///< name of the samples both variants record
};

/// Resource limits for each case's process ("limits" in scenario.json); an unset one takes the
/// harness's default (see docs/containment.md).
struct limits_spec {
    std::optional<std::uint64_t> address_space; ///< bytes (RLIMIT_AS)
    std::optional<std::uint64_t> cpu_seconds;   ///< RLIMIT_CPU
    std::optional<std::uint64_t> file_size;     ///< bytes (RLIMIT_FSIZE)
};

/// A public issue thread a scenario reproduces ("evidence" in scenario.json): where users met
/// the failure, in their own words.
struct evidence_spec {
    std::string repo; ///< owner/name on GitHub
    std::uint64_t number = 0;
    std::string title; ///< the thread's title
    std::string shows; ///< what the thread reports that the scenario reproduces
};

struct manifest {
    std::string name;
    std::string summary;
    std::string failure_class;
    std::vector<std::string> seeds;
    std::vector<evidence_spec> evidence;
    std::vector<std::string> labels;
    std::vector<std::string> backends;
    double timeout_seconds = 60;
    std::vector<param_spec> params;
    std::vector<variant_spec> variants;
    std::vector<ratio_spec> ratios;
    std::vector<compile_check_spec> compile_checks;
    limits_spec limits;
    std::vector<timing_spec> timings;

    /// The declaration of a variant's timed series (the variant's own first), or null.
    const timing_spec* timing_of(const variant_spec& variant, const std::string& series) const;
    /// The control a variant's series is bound by on a backend ("" when none is declared; a
    /// series declared without a control for a backend is not blessed on that backend).
    std::string bound_by(const variant_spec& variant, const std::string& backend,
                         const std::string& series) const;
    /// Every control the variant's series are bound by on a backend, each once, in order.
    std::vector<std::string> controls_of(const variant_spec& variant,
                                         const std::string& backend) const;
    const variant_spec* find_variant(std::string_view variant) const;
    const param_spec* find_param(std::string_view param) const;
    /// The backends a variant runs on.
    std::vector<std::string> backends_of(const variant_spec& variant) const;
};

/// Whether `value` (already of the parameter's type) is within its min, max and choices; the
/// error (pitfall_error::bad_parameter) says which bound, without the parameter's name.
status check_param_value(const param_spec& spec, const nlohmann::json& value);

/// Parses and validates; the error (library pitfall, name "bad_manifest") names `origin`.
status_or<manifest> parse_manifest(std::string_view text, const std::string& origin);

} // namespace pitfall
