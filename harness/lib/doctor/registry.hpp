// The doctor's rules, private to harness/lib/doctor (and its unit test): each rule is one record
// beside the check that applies it, and one list of the checks (registry.cpp) is what
// diagnose(), --explain (doctor_rules, find_rule) and diagnosis::explained_errors walk.
//
// Adding a rule: its record and its check in one file (a check lists the rules it applies), and
// a new check one line in registry.cpp's list.
#pragma once

#include "doctor/doctor.hpp"
#include "doctor/facts.hpp"

#include <string>
#include <vector>

namespace pitfall::runner::doctor {

/// A rule with no case to reproduce it: a state of the hardware, the driver install or this
/// build that no scenario variant can bring about on purpose.
inline constexpr const char* no_reproducing_case = "";

/// One rule: what `pitfall doctor --explain ID` says of it whether or not it fires, and what a
/// finding of it says. The check computes what depends on the machine: the title, the evidence
/// and, where the words name this machine's paths or versions, the why or the fix.
struct rule {
    const char* id; ///< stable: --explain ID, --json's "id"
    /// A finding's severity, unless its check grades the case on this machine (an entry of
    /// CUDA_VISIBLE_DEVICES past the first hides some GPUs, not all: a warning, not an error).
    finding_severity severity;
    const char* reproduced_by; ///< the case that shows it ("cuda.version_mismatch.stub_driver")
    const char* anchor;        ///< its section of docs/cuda-rules.md
    /// The CUDA errors an error of this rule explains: a CUDA case failing with one of them
    /// failed because of the machine (verdicts say so).
    std::vector<std::string> explained_errors;
    /// `--explain ID`: the same words whether or not the rule fires here.
    struct explanation {
        const char* checks;
        const char* why;
        const char* fix;
    } explain;
    /// What a finding says, in full; "" where the check words it for this machine (and for an
    /// ok finding's fix: there is nothing to do).
    struct finding_words {
        const char* why;
        const char* fix;
    } says;

    /// "docs/cuda-rules.md#<anchor>".
    std::string link() const;
    /// A finding of this rule, with the machine's own title and evidence.
    finding found(std::string title, std::string observed) const;
};

using findings = std::vector<finding>;
using check_function = void (*)(const facts&, findings&);

/// One check: a function of the facts that appends the findings of its rules (nothing where it
/// has no say), and those rules, in the order --explain all lists them.
struct check {
    check_function run;
    std::vector<const rule*> rules;
};

/// Every check, in the order diagnose() runs them: within one severity, findings keep it.
const std::vector<check>& registry();

/// The rule of that id; nullptr where there is none.
const rule* rule_named(const std::string& id);

// The checks, by the file that holds them and their rules.
// driver_checks.cpp: the probe, the build and the driver library.
check probe_check();
check build_check();
check driver_library_check();
// driver_version_checks.cpp: the driver against the runtime, forward compatibility.
check driver_version_check();
// environment_checks.cpp: variables that decide which GPUs CUDA sees and what it does.
check visible_devices_check();
check device_order_check();
check cuda_env_check();
// library_checks.cpp: cuBLAS, cuDNN and copies on the loader's path.
check cublas_check();
check cudnn_check();
check loader_copies_check();
// device_checks.cpp: NVML's view of each GPU, and pageable memory access.
check nvml_check();
check pageable_memory_check();
// kernel_image_checks.cpp: this build's SASS and PTX against the devices.
check kernel_images_check();
// toolkit_checks.cpp: nvcc on PATH and in CUDA_HOME against the runtime loaded.
check toolkit_check();

} // namespace pitfall::runner::doctor
