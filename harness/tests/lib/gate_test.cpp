// The gate's pure parts: the reason Slurm keeps, node names, what a gate case's verdict means,
// the GPUs a fingerprint lists, and what a requirement accepts of a machine.
#include "gate/gate.hpp"
#include "gate/gate_parts.hpp"
#include "gate/requirement.hpp"

#include <gtest/gtest.h>

namespace pitfall::runner {
namespace {
using nlohmann::json;

TEST(GateReason, IsOnePrintableLineOfAtMost200Characters) {
    EXPECT_EQ(one_line_reason("pitfall:  stub\n\tdriver\r\n"), "pitfall: stub driver");
    EXPECT_EQ(one_line_reason("caf\xc3\xa9 \x1b[31mred\x7f!"), "caf?? [31mred !");
    const std::string long_text(500, 'x');
    const std::string cut = one_line_reason(long_text);
    EXPECT_EQ(cut.size(), gate_reason_limit);
    EXPECT_EQ(cut.substr(cut.size() - 3), "...");
    EXPECT_EQ(one_line_reason("   "), "");
    // Shell metacharacters are kept as they are: the reason is one argv element, never shell.
    EXPECT_EQ(one_line_reason("$(touch x); `id` | 'q\""), "$(touch x); `id` | 'q\"");
}

TEST(GateNodeName, AcceptsSlurmNamesAndRefusesFieldsAndOptions) {
    for (const std::string& ok : {std::string("n1"), std::string("gpu-node-07"),
                                  std::string("a.b_c"), std::string(64, 'n')})
        EXPECT_TRUE(valid_node_name(ok)) << ok;
    for (const std::string& bad :
         {std::string(), std::string(65, 'n'), std::string("-x"), std::string("n1 State=RESUME"),
          std::string("a;b"), std::string("a\nb"), std::string("n\xc3\xa9")})
        EXPECT_FALSE(valid_node_name(bad)) << bad;
}

TEST(GateCaseStanding, PassAdmitsEnvironmentFaultsFailAbsenceIsUnjudged) {
    EXPECT_EQ(gate_case_standing("PASS", ""), "ok");
    EXPECT_EQ(gate_case_standing("FAIL", "x"), "failing");
    EXPECT_EQ(gate_case_standing("CRASH", ""), "failing");
    EXPECT_EQ(gate_case_standing("TIMEOUT", ""), "failing");
    EXPECT_EQ(gate_case_standing("UNSUPPORTED", "environment: the stub libcuda.so (...)"),
              "failing");
    EXPECT_EQ(gate_case_standing("UNSUPPORTED", "built without CUDA"), "unjudged");
    EXPECT_EQ(gate_case_standing("NO_BASELINE", ""), "unjudged");
    EXPECT_EQ(gate_case_standing("NOT_COMPARED", ""), "unjudged");
}

TEST(GateGpus, FromNvmlElseCudaElseOneEntryForTheNode) {
    const json nvml = {
        {"libraries",
         {{"nvml", {{"devices", {{{"uuid", "GPU-a"}, {"name", "H100"}}, {{"uuid", "GPU-b"}}}}}},
          {"cuda", {{"devices", {json::object()}}}}}}};
    auto gpus = gate_parts::gpus_of(nvml);
    ASSERT_EQ(gpus.size(), 2u);
    EXPECT_EQ(gpus[0].visible_devices(), "GPU-a");
    EXPECT_EQ(gpus[1].index, 1);
    EXPECT_EQ(gpus[0].to_json()["name"], "H100");
    const json cuda_only = {{"libraries", {{"cuda", {{"devices", {json::object()}}}}}}};
    gpus = gate_parts::gpus_of(cuda_only);
    ASSERT_EQ(gpus.size(), 1u);
    EXPECT_EQ(gpus[0].visible_devices(), "0");
    gpus = gate_parts::gpus_of(json{{"libraries", "not an object"}});
    ASSERT_EQ(gpus.size(), 1u);
    EXPECT_FALSE(gpus[0].index.has_value());
    EXPECT_EQ(gpus[0].visible_devices(), "");
    EXPECT_TRUE(gpus[0].to_json()["uuid"].is_null());
}

finding error_finding(const char* id, const char* title) {
    finding f;
    f.id = id;
    f.severity = finding_severity::error;
    f.title = title;
    return f;
}

/// A machine without a driver whose fingerprint picks `chosen` ("no-gpu", "host"), or one with
/// a GPU and no error (chosen "hopper-cuda13").
void make_machine(machine_view& view, const std::string& chosen) {
    view.profiles.clear();
    for (const auto& [name, match] :
         {std::pair<const char*, json>{"no-gpu", json{{"gpu_count", 0}}},
          std::pair<const char*, json>{"hopper-cuda13", json{{"compute_capability", "9.0"}}},
          std::pair<const char*, json>{"host", json::object()}}) {
        profile p;
        p.name = name;
        p.match = match;
        view.profiles.push_back(std::move(p));
    }
    for (const auto& p : view.profiles)
        if (p.name == chosen)
            view.choice.chosen = &p;
    const bool gpu = chosen == "hopper-cuda13";
    view.summary = {{"gpu_count", gpu ? 1 : 0}};
    view.doctor.findings.clear();
    if (!gpu)
        view.doctor.findings.push_back(error_finding("no-driver", "no NVIDIA driver"));
}

TEST(GateRequirement, NamesGpuOrAProfileThatCanBeChosen) {
    machine_view view;
    make_machine(view, "no-gpu");
    EXPECT_TRUE(check_requirement("gpu", view.profiles, "--require").is_ok());
    EXPECT_TRUE(check_requirement("hopper-cuda13", view.profiles, "--require").is_ok());
    const auto bad = check_requirement("hoper-cuda13", view.profiles, "--require");
    ASSERT_FALSE(bad.is_ok());
    EXPECT_NE(bad.message().find("--require hoper-cuda13"), std::string::npos);
    EXPECT_NE(bad.message().find("hopper-cuda13"), std::string::npos);
}

TEST(GateRequirement, NoDriverIsAcceptedOnlyWhereTheRequiredProfileHasNoGpu) {
    machine_view view;
    make_machine(view, "no-gpu");
    const finding& no_driver = view.doctor.findings.front();
    EXPECT_TRUE(accepted_by_requirement("no-gpu", view, no_driver));
    EXPECT_FALSE(unmet_requirement("no-gpu", view).has_value());
    EXPECT_FALSE(accepted_by_requirement("gpu", view, no_driver));
    EXPECT_EQ(unmet_requirement("gpu", view).value(), "no NVIDIA driver [no-driver]");
    EXPECT_EQ(unmet_requirement("hopper-cuda13", view).value(),
              "this machine's fingerprint picks profile no-gpu, not hopper-cuda13: no NVIDIA "
              "driver [no-driver]");
    // Another error is never accepted, whatever is required.
    view.doctor.findings.push_back(error_finding("stub-driver", "the stub"));
    EXPECT_FALSE(accepted_by_requirement("no-gpu", view, view.doctor.findings.back()));
    EXPECT_EQ(unmet_requirement("no-gpu", view).value(), "the stub [stub-driver]");
}

TEST(GateRequirement, HostProfileDoesNotExcuseAMissingDriver) {
    machine_view view;
    make_machine(view, "host");
    EXPECT_FALSE(accepted_by_requirement("host", view, view.doctor.findings.front()));
    EXPECT_TRUE(unmet_requirement("host", view).has_value());
}

TEST(GateRequirement, AGpuMachineMeetsGpuAndItsProfile) {
    machine_view view;
    make_machine(view, "hopper-cuda13");
    EXPECT_FALSE(unmet_requirement("gpu", view).has_value());
    EXPECT_FALSE(unmet_requirement("hopper-cuda13", view).has_value());
    EXPECT_NE(unmet_requirement("no-gpu", view).value().find("picks profile hopper-cuda13"),
              std::string::npos);
    view.summary["gpu_count"] = 0;
    EXPECT_EQ(unmet_requirement("gpu", view).value(), "no GPU visible to CUDA (gpu_count 0)");
}

} // namespace
} // namespace pitfall::runner
