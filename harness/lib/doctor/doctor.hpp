// `pitfall doctor`: what is wrong with this machine for CUDA work, in plain words. The rules are
// pure functions of the run's fingerprint (the probe's facts about the driver, NVML, the CUDA
// runtime, cuBLAS, cuDNN and the loader's path, plus the host and the environment), so the
// unit tests feed them synthetic facts and `pitfall run` judges with the same facts it records.
// Each rule and its source: docs/cuda-rules.md; each rule's record, beside its check: registry.hpp.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace pitfall::runner {

enum class finding_severity { error, warning, ok };
const char* severity_name(finding_severity s);

/// One thing found, worst first in a diagnosis. `id` is stable (`pitfall doctor --explain ID`).
struct finding {
    std::string id;
    finding_severity severity = finding_severity::ok;
    std::string title;    ///< one line, self-contained: the run's headline uses it as it is
    std::string observed; ///< what was seen, with the evidence (paths, versions as 13.0, 9.19.0)
    std::string why;      ///< why it matters
    std::string fix;      ///< what to do (empty for ok)
    std::string reproduced_by; ///< the case that shows it ("cuda.version_mismatch.stub_driver")
    std::string rule;          ///< docs/cuda-rules.md#anchor
};

struct diagnosis {
    std::vector<finding> findings; ///< errors, then warnings, then ok
    /// No error: CUDA work can run here.
    bool cuda_usable() const;
    /// The worst error's title, or empty where there is none.
    std::string headline() const;
    /// The CUDA error names the errors found explain (no driver: cudaErrorInsufficientDriver;
    /// the stub: cudaErrorStubLibrary; no device: cudaErrorNoDevice), for saying so.
    std::vector<std::string> explained_errors() const;
    /// Those of them that make a failing CUDA case an environment verdict: all but
    /// cudaErrorInsufficientDriver, the outcome the baselines for a machine without a GPU are
    /// written for (a case failing with it there is judged against them, as before).
    std::vector<std::string> environment_errors() const;
    nlohmann::json to_json() const;
};

/// The SASS and PTX images embedded in each program of a build (name -> path), as facts a
/// fingerprint carries ("build_images"): {"<name>": {"images": [{"name": "sm_90a", "kind":
/// "sass", "arch": 90, "variant": "arch_specific", "version": "1.8", "container": 0}, ...]}}, or
/// {"error": "..."} for a program that cannot be read. Programs without device code are left out.
nlohmann::json build_images(const std::vector<std::pair<std::string, std::string>>& programs);

/// The CUDA toolkits a rebuild here would use, as facts a fingerprint carries ("toolkits"):
/// the first executable nvcc on `path` (PATH's value) and `cuda_home`'s bin/nvcc (the variable's
/// name and value), each asked `nvcc --version` in a child process: {"path": {"nvcc": "...",
/// "release": "13.0"}, "cuda_home": {"variable": "CUDA_HOME", "folder": "...", "nvcc": "...",
/// "release": "12.4"}}; an entry that could not be read has "error" instead of "release"; no
/// "cuda_home" where neither variable is set.
nlohmann::json toolkit_facts(const std::optional<std::string>& path,
                             const std::optional<std::pair<std::string, std::string>>& cuda_home);
/// toolkit_facts of this process's PATH and CUDA_HOME (else CUDA_PATH).
nlohmann::json toolkit_facts_of_environment();
/// "13.0" of `nvcc --version`'s "Cuda compilation tools, release 13.0, V13.0.88"; "" if none.
std::string nvcc_release(const std::string& version_output);

/// The findings for a fingerprint (take_fingerprint's JSON). Never fails: a fact the probe
/// could not learn is said to be unknown, and a missing or broken probe output is itself a
/// finding.
diagnosis diagnose(const nlohmann::json& fingerprint);

/// What `pitfall doctor` prints: a verdict line, then each finding with its evidence and fix.
std::string render_diagnosis(const diagnosis& d);

/// One rule as documentation: what it checks and why, whether or not it fires here.
struct rule_doc {
    std::string id;
    std::string checks;
    std::string why;
    std::string fix;
    std::string reproduced_by;
    std::string rule;
};
const std::vector<rule_doc>& doctor_rules();
std::optional<rule_doc> find_rule(const std::string& id);

/// Versions as people write them: 13000 -> "13.0", 12040 -> "12.4" (cudaRuntimeGetVersion,
/// cudaDriverGetVersion); cuDNN 91900 -> "9.19.0", 8907 -> "8.9.7" (cudnnGetVersion).
std::string cuda_version_text(long long v);
std::string cudnn_version_text(long long v);
/// The oldest driver branch a CUDA major runs on under minor-version compatibility (13 -> 580,
/// 12 -> 525, 11 -> 450); 0 where unknown.
int minimum_driver_branch(int cuda_major);
/// A driver version's branch: "580.65.06" -> 580; 0 where the text starts with no number.
int branch_of(const std::string& driver_version);

} // namespace pitfall::runner
