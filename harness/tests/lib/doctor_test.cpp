// The doctor's rules over synthetic facts: each machine below is a fingerprint as
// take_fingerprint writes it, cut to what the rule reads.
#include "doctor/doctor.hpp"
#include "doctor/registry.hpp"

#include "pitfall/detail/json_schema.hpp"
#include "pitfall/detail/manifest.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

namespace {
using namespace pitfall::runner;
using nlohmann::json;

/// A CUDA 13.0 build on a working H100 with driver 580.65.06, NVML and cuDNN 9.19: no errors.
json healthy() {
    return {
        {"schema", "pitfall.fingerprint/1"},
        {"libraries",
         {{"built_with_cuda", true},
          {"driver",
           {{"library", "libcuda.so.1"},
            {"path", "/usr/lib/x86_64-linux-gnu/libcuda.so.580.65.06"},
            {"cu_init", "CUDA_SUCCESS"},
            {"version", 13000},
            {"device_count", 1},
            {"kernel_module", {{"loaded", true}, {"version", "580.65.06"}}},
            {"device_nodes", {"/dev/nvidia0", "/dev/nvidiactl"}}}},
          {"nvml",
           {{"driver_version", "580.65.06"},
            {"device_count", 1},
            {"devices",
             {{{"index", 0},
               {"name", "NVIDIA H100 80GB HBM3"},
               {"memory", {{"total_bytes", 85899345920LL}, {"used_bytes", 536870912LL}}},
               {"compute_processes", 0},
               {"compute_mode", 0},
               {"mig_mode", {{"current", 0}, {"pending", 0}}},
               {"persistence_mode", true},
               {"retired_pages_pending", false},
               {"clocks_throttle_reasons", 1}}}}}},
          {"cuda",
           {{"compiled_runtime_version", 13000},
            {"runtime_version", 13000},
            {"driver_version", 13000},
            {"device_count", 1},
            {"devices",
             {{{"ordinal", 0},
               {"name", "NVIDIA H100 80GB HBM3"},
               {"compute_capability", "9.0"},
               {"pageable_memory_access", false}}}}}},
          {"cublas", {{"library", "libcublas.so.13"}, {"path", "/usr/lib/libcublas.so.13.0.0"}}},
          {"cudnn",
           {{"compiled_version", 91900},
            {"loaded_version", 91900},
            {"loaded_from", "/usr/lib/x86_64-linux-gnu/libcudnn.so.9.19.0"},
            {"sublibrary_checks",
             {{"cudnnGraphVersionCheck", "CUDNN_STATUS_SUCCESS"},
              {"cudnnOpsVersionCheck", "CUDNN_STATUS_SUCCESS"}}}}},
          {"loaded_libraries", json::array()},
          {"loader_path_copies", json::object()}}},
        {"host", {{"container", {{"in_container", false}}}}},
        {"environment", json::object()}};
}

const finding* find(const diagnosis& d, const std::string& id) {
    for (const auto& f : d.findings)
        if (f.id == id)
            return &f;
    return nullptr;
}

int errors(const diagnosis& d) {
    int n = 0;
    for (const auto& f : d.findings)
        n += f.severity == finding_severity::error ? 1 : 0;
    return n;
}

TEST(DoctorVersions, DecodedAsPeopleWriteThem) {
    EXPECT_EQ(cuda_version_text(13000), "13.0");
    EXPECT_EQ(cuda_version_text(12040), "12.4");
    EXPECT_EQ(cuda_version_text(11080), "11.8");
    EXPECT_EQ(cudnn_version_text(91900), "9.19.0");
    EXPECT_EQ(cudnn_version_text(90100), "9.1.0");
    EXPECT_EQ(cudnn_version_text(8907), "8.9.7");
    EXPECT_EQ(minimum_driver_branch(13), 580);
    EXPECT_EQ(minimum_driver_branch(12), 525);
    EXPECT_EQ(minimum_driver_branch(11), 450);
    EXPECT_EQ(minimum_driver_branch(10), 0);
}

TEST(Doctor, HealthyMachineHasNoError) {
    const diagnosis d = diagnose(healthy());
    EXPECT_TRUE(d.cuda_usable()) << d.headline();
    EXPECT_EQ(d.headline(), "");
    ASSERT_NE(find(d, "driver"), nullptr);
    EXPECT_EQ(find(d, "driver")->severity, finding_severity::ok);
    EXPECT_NE(find(d, "driver")->title.find("580.65.06"), std::string::npos);
    EXPECT_EQ(find(d, "cudnn-version")->severity, finding_severity::ok);
}

TEST(Doctor, NoDriverNamesTheLibraryAndTheBranchNeeded) {
    json fp = healthy();
    auto& lib = fp["libraries"];
    lib["driver"] = {{"library", "libcuda.so.1"},
                     {"load_error", "libcuda.so.1: cannot open shared object file"},
                     {"kernel_module", {{"loaded", false}}},
                     {"device_nodes", json::array()}};
    lib["nvml"] = {{"load_error", "libnvidia-ml.so.1: cannot open shared object file"}};
    lib["cuda"] = {{"runtime_version", 13000},
                   {"driver_version", 0},
                   {"device_count", 0},
                   {"device_error", {{"error", "cudaErrorInsufficientDriver"}}},
                   {"devices", json::array()}};
    const diagnosis d = diagnose(fp);
    EXPECT_FALSE(d.cuda_usable());
    EXPECT_EQ(d.headline(),
              "no NVIDIA driver (libcuda.so.1 not found); CUDA 13.0 needs driver >= 580");
    const finding* f = find(d, "no-driver");
    ASSERT_NE(f, nullptr);
    EXPECT_NE(f->observed.find("cannot open shared object file"), std::string::npos);
    EXPECT_NE(f->fix.find("580"), std::string::npos);
    EXPECT_EQ(f->reproduced_by, "cuda.version_mismatch.runtime_vs_driver");
    EXPECT_EQ(find(d, "no-nvml"), nullptr) << "no driver: NVML's absence is no news";
    EXPECT_EQ(errors(d), 1);
}

TEST(Doctor, ContainerWithDevicesButNoLibrariesIsTheToolkitMissing) {
    json fp = healthy();
    fp["libraries"]["driver"]["load_error"] = "libcuda.so.1: cannot open shared object file";
    fp["host"]["container"]["in_container"] = true;
    const diagnosis d = diagnose(fp);
    ASSERT_NE(find(d, "container-without-toolkit"), nullptr);
    EXPECT_EQ(find(d, "no-driver"), nullptr);
    EXPECT_NE(find(d, "container-without-toolkit")->fix.find("nvidia.com/gpu=all"),
              std::string::npos);
}

TEST(Doctor, StubOnThePathSaysWhichFolderToRemove) {
    json fp = healthy();
    auto& lib = fp["libraries"];
    lib["driver"]["path"] = "/usr/local/cuda-13.0/targets/x86_64-linux/lib/stubs/libcuda.so";
    lib["driver"]["cu_init"] = "CUDA_ERROR_STUB_LIBRARY";
    lib["loaded_libraries"] = {"/tmp/stub-path/libcuda.so.1"};
    lib["cuda"]["device_error"] = {{"error", "cudaErrorStubLibrary"}};
    const diagnosis d = diagnose(fp);
    const finding* f = find(d, "stub-driver");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->severity, finding_severity::error);
    EXPECT_NE(f->fix.find("remove /tmp/stub-path from LD_LIBRARY_PATH"), std::string::npos)
        << f->fix;
    EXPECT_EQ(d.findings.front().id, "stub-driver");
}

TEST(Doctor, StubInstalledAsTheDriverSaysWhichFileToDelete) {
    // A node whose image copied the stub into the system library folder as libcuda.so.1:
    // nothing names that folder, so "remove it from LD_LIBRARY_PATH" would be no fix.
    json fp = healthy();
    auto& lib = fp["libraries"];
    lib["driver"]["path"] = "/usr/lib/x86_64-linux-gnu/libcuda.so.1";
    lib["driver"]["cu_init"] = "CUDA_ERROR_STUB_LIBRARY";
    lib["loaded_libraries"] = {"/usr/lib/x86_64-linux-gnu/libcuda.so.1"};
    lib["cuda"]["device_error"] = {{"error", "cudaErrorStubLibrary"}};
    const diagnosis d = diagnose(fp);
    const finding* f = find(d, "stub-driver");
    ASSERT_NE(f, nullptr);
    EXPECT_NE(f->fix.find("delete /usr/lib/x86_64-linux-gnu/libcuda.so.1"), std::string::npos)
        << f->fix;
    EXPECT_EQ(f->fix.find("LD_LIBRARY_PATH"), std::string::npos) << f->fix;
}

TEST(Doctor, DriverLibraryWithoutDeviceIsNoDevice) {
    json fp = healthy();
    auto& drv = fp["libraries"]["driver"];
    drv["cu_init"] = "CUDA_ERROR_NO_DEVICE";
    drv["kernel_module"] = {{"loaded", false}};
    drv["device_nodes"] = json::array();
    drv["path"] = "/usr/lib/x86_64-linux-gnu/libcuda.so.535.216.01";
    const diagnosis d = diagnose(fp);
    const finding* f = find(d, "no-device");
    ASSERT_NE(f, nullptr);
    EXPECT_NE(f->observed.find("no NVIDIA kernel module"), std::string::npos);
}

TEST(Doctor, OlderDriverMajorIsTooOld) {
    json fp = healthy();
    fp["libraries"]["cuda"]["driver_version"] = 12020;
    fp["libraries"]["driver"]["path"] = "/usr/lib/x86_64-linux-gnu/libcuda.so.535.104.05";
    fp["libraries"]["driver"]["kernel_module"]["version"] = "535.104.05";
    const diagnosis d = diagnose(fp);
    const finding* f = find(d, "driver-too-old");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->title, "the driver 535.104.05 (CUDA 12.2) is older than the CUDA 13.0 runtime; "
                        "CUDA 13.0 needs driver >= 580");
}

TEST(Doctor, OlderMinorIsMinorVersionCompatibility) {
    json fp = healthy();
    fp["libraries"]["cuda"]["runtime_version"] = 12080;
    fp["libraries"]["cuda"]["driver_version"] = 12040;
    const diagnosis d = diagnose(fp);
    ASSERT_NE(find(d, "minor-version-compat"), nullptr);
    EXPECT_EQ(find(d, "minor-version-compat")->severity, finding_severity::warning);
    EXPECT_TRUE(d.cuda_usable());
}

TEST(Doctor, ForwardCompatOnA535BranchRunsOnDataCenterParts) {
    json fp = healthy();
    auto& drv = fp["libraries"]["driver"];
    drv["path"] = "/usr/local/cuda-13.0/compat/libcuda.so.580.65.06";
    drv["kernel_module"]["version"] = "535.216.01";
    fp["libraries"]["cuda"]["driver_version"] = 13000;
    diagnosis d = diagnose(fp);
    ASSERT_NE(find(d, "forward-compat"), nullptr);
    EXPECT_EQ(find(d, "forward-compat")->severity, finding_severity::ok);
    EXPECT_TRUE(d.cuda_usable());
    EXPECT_EQ(find(d, "driver-too-old"), nullptr) << "forward compatibility is not 'insufficient'";

    drv["kernel_module"]["version"] = "550.127.05";
    d = diagnose(fp);
    ASSERT_NE(find(d, "compat-unsupported"), nullptr) << "cuda-compat-13 has no 550 support";
    EXPECT_NE(find(d, "compat-unsupported")->title.find("branch 550"), std::string::npos);
    drv["kernel_module"]["version"] = "570.195.03";
    EXPECT_TRUE(diagnose(fp).cuda_usable());

    fp["libraries"]["cuda"]["devices"][0]["name"] = "NVIDIA GeForce RTX 4090";
    d = diagnose(fp);
    ASSERT_NE(find(d, "compat-unsupported"), nullptr);
    EXPECT_FALSE(d.cuda_usable());
}

TEST(Doctor, CompatRefusedByTheDriverIsNamed) {
    json fp = healthy();
    fp["libraries"]["driver"]["cu_init"] = "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH";
    const diagnosis d = diagnose(fp);
    ASSERT_NE(find(d, "driver-init-failed"), nullptr);
    EXPECT_NE(d.headline().find("CUDA_ERROR_SYSTEM_DRIVER_MISMATCH"), std::string::npos);
}

TEST(Doctor, VisibleDevices) {
    json fp = healthy();
    fp["environment"]["CUDA_VISIBLE_DEVICES"] = "";
    EXPECT_EQ(diagnose(fp).findings.front().id, "visible-devices-empty");

    fp["environment"]["CUDA_VISIBLE_DEVICES"] = "0,3";
    diagnosis d = diagnose(fp);
    const finding* f = find(d, "visible-devices-invalid");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->severity, finding_severity::warning) << "GPU 0 stays visible";
    EXPECT_NE(f->title.find("index 3 is past the last GPU"), std::string::npos) << f->title;

    fp["environment"]["CUDA_VISIBLE_DEVICES"] = "7";
    EXPECT_EQ(find(diagnose(fp), "visible-devices-invalid")->severity, finding_severity::error);

    fp["environment"]["CUDA_VISIBLE_DEVICES"] = "MIG-1b2c3d4e-0000-1111-2222-333344445555";
    d = diagnose(fp);
    EXPECT_NE(find(d, "visible-devices-mig"), nullptr);
    EXPECT_EQ(find(d, "visible-devices-invalid"), nullptr);
}

TEST(Doctor, DeviceOrderMattersWithTwoGpus) {
    json fp = healthy();
    EXPECT_EQ(find(diagnose(fp), "device-order"), nullptr);
    fp["libraries"]["nvml"]["device_count"] = 2;
    EXPECT_NE(find(diagnose(fp), "device-order"), nullptr);
    fp["environment"]["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID";
    EXPECT_EQ(find(diagnose(fp), "device-order"), nullptr);
}

TEST(Doctor, CudnnRule) {
    json fp = healthy();
    fp["libraries"]["cudnn"]["loaded_version"] = 91400;
    diagnosis d = diagnose(fp);
    ASSERT_EQ(find(d, "cudnn-version")->severity, finding_severity::error);
    EXPECT_NE(
        find(d, "cudnn-version")->title.find("cuDNN 9.14.0 is loaded but this build needs 9.19.0"),
        std::string::npos);
    fp["libraries"]["cudnn"]["loaded_version"] = 92000;
    EXPECT_EQ(find(diagnose(fp), "cudnn-version")->severity, finding_severity::ok);
    fp["libraries"]["cudnn"]["loaded_version"] = 8907;
    EXPECT_NE(find(diagnose(fp), "cudnn-version")->title.find("another major"), std::string::npos);
    fp["libraries"]["cudnn"]["loaded_version"] = 91900;
    fp["libraries"]["cudnn"]["sublibrary_checks"]["cudnnOpsVersionCheck"] =
        "killed the process: SIGABRT (cuDNN printed: Invalid handle)";
    d = diagnose(fp);
    ASSERT_NE(find(d, "cudnn-mixed"), nullptr);
    EXPECT_NE(find(d, "cudnn-mixed")->observed.find("SIGABRT"), std::string::npos);
}

TEST(Doctor, MissingCublasAndTwoCopiesOfCudnn) {
    json fp = healthy();
    fp["libraries"]["cublas"] = {{"library", "libcublas.so.13"},
                                 {"load_error", "libcublas.so.13: cannot open shared object file"}};
    fp["libraries"]["loader_path_copies"] = {
        {"libcudnn.so.9",
         {{{"folder", "/venv/nvidia/cudnn/lib"},
           {"file", "/venv/nvidia/cudnn/lib/libcudnn.so.9"},
           {"version", "9"}},
          {{"folder", "/usr/lib/x86_64-linux-gnu"},
           {"file", "/usr/lib/x86_64-linux-gnu/libcudnn.so.9.1.0"},
           {"version", "9.1.0"}}}}};
    const diagnosis d = diagnose(fp);
    EXPECT_EQ(find(d, "cublas-missing")->severity, finding_severity::error);
    const finding* copies = find(d, "duplicate-library");
    ASSERT_NE(copies, nullptr);
    EXPECT_EQ(copies->severity, finding_severity::warning);
    EXPECT_NE(copies->observed.find("/venv/nvidia/cudnn/lib"), std::string::npos);
}

TEST(Doctor, NvmlState) {
    json fp = healthy();
    auto& dev = fp["libraries"]["nvml"]["devices"][0];
    dev["memory"]["used_bytes"] = 60LL << 30;
    dev["compute_processes"] = 2;
    dev["compute_mode"] = 2;
    dev["mig_mode"] = {{"current", 1}, {"pending", 1}};
    dev["persistence_mode"] = false;
    dev["remapped_rows"] = {{"pending", true}, {"failure", false}};
    dev["clocks_throttle_reasons"] = 0x41; // idle + HW thermal slowdown
    const diagnosis d = diagnose(fp);
    for (const char* id : {"memory-in-use", "compute-mode", "mig-mode", "persistence-off",
                           "memory-errors", "clocks-slowed"})
        EXPECT_NE(find(d, id), nullptr) << id;
    EXPECT_EQ(find(d, "compute-mode")->severity, finding_severity::error);
    EXPECT_EQ(find(d, "memory-errors")->severity, finding_severity::warning)
        << "a pending row remapping lets work go on";
    EXPECT_NE(find(d, "clocks-slowed")->title.find("HW thermal slowdown"), std::string::npos);
}

TEST(Doctor, ExclusiveProcessHeldAndFailedRemapAreErrors) {
    json fp = healthy();
    auto& dev = fp["libraries"]["nvml"]["devices"][0];
    dev["compute_mode"] = 3;
    EXPECT_EQ(find(diagnose(fp), "compute-mode")->severity, finding_severity::warning);
    dev["compute_processes"] = 1;
    EXPECT_EQ(find(diagnose(fp), "compute-mode")->severity, finding_severity::error);
    dev["remapped_rows"] = {{"pending", false}, {"failure", true}};
    EXPECT_EQ(find(diagnose(fp), "memory-errors")->severity, finding_severity::error);
}

TEST(Doctor, VariablesThatAlterCudaAreNamed) {
    json fp = healthy();
    EXPECT_EQ(find(diagnose(fp), "cuda-env"), nullptr);
    fp["environment"]["CUDA_LAUNCH_BLOCKING"] = "1";
    fp["environment"]["CUDA_INJECTION64_PATH"] = "/opt/tool/libinject.so";
    const diagnosis d = diagnose(fp);
    const finding* f = find(d, "cuda-env");
    ASSERT_NE(f, nullptr);
    EXPECT_NE(f->observed.find("CUDA_INJECTION64_PATH=/opt/tool/libinject.so"), std::string::npos);
    EXPECT_NE(f->observed.find("CUDA_LAUNCH_BLOCKING=1"), std::string::npos);
}

json image(const char* kind, unsigned arch, const char* variant, unsigned major = 0,
           unsigned minor = 0) {
    return {{"name", "x"},        {"kind", kind},           {"arch", arch},
            {"variant", variant}, {"version_major", major}, {"version_minor", minor},
            {"container", 0}};
}

/// A vector, not a json: `json x = {one}` is a copy of `one` under Clang but an array under GCC.
json with_device_and_images(const char* cc, const std::vector<json>& images,
                            long long driver = 13000) {
    json fp = healthy();
    fp["libraries"]["cuda"]["devices"][0]["compute_capability"] = cc;
    fp["libraries"]["cuda"]["driver_version"] = driver;
    fp["build_images"] = {{"program_a", {{"images", json(images)}}}};
    return fp;
}

TEST(DoctorKernelImages, ArchSpecificAndFamilyTargets) {
    // sm_100a on 10.3: an arch-specific image runs on exactly 10.0, so nothing runs here.
    diagnosis d = diagnose(with_device_and_images("10.3", {image("sass", 100, "arch_specific")}));
    ASSERT_NE(find(d, "no-kernel-image"), nullptr);
    EXPECT_NE(find(d, "no-kernel-image")->title.find("cudaErrorNoKernelImageForDevice"),
              std::string::npos);
    // compute_90a PTX never JITs to 10.0.
    d = diagnose(with_device_and_images("10.0", {image("ptx", 90, "arch_specific", 9, 0)}));
    EXPECT_NE(find(d, "no-kernel-image"), nullptr);
    // compute_100f stays in 10.x: runs on 10.3 (by JIT), not on 12.0.
    d = diagnose(with_device_and_images("10.3", {image("ptx", 100, "family", 9, 0)}));
    EXPECT_NE(find(d, "ptx-jit"), nullptr);
    d = diagnose(with_device_and_images("12.0", {image("ptx", 100, "family", 9, 0)}));
    EXPECT_NE(find(d, "no-kernel-image"), nullptr);
    // Plain SASS sm_90 on 9.0: from SASS, all well.
    d = diagnose(with_device_and_images("9.0", {image("sass", 90, "plain")}));
    ASSERT_NE(find(d, "kernel-images"), nullptr);
    EXPECT_TRUE(d.cuda_usable());
}

TEST(DoctorKernelImages, PtxNewerThanTheDriverJits) {
    const diagnosis d =
        diagnose(with_device_and_images("12.0", {image("ptx", 90, "plain", 9, 0)}, 12040));
    ASSERT_NE(find(d, "ptx-too-new"), nullptr);
    EXPECT_NE(find(d, "ptx-too-new")->title.find("cudaErrorUnsupportedPtxVersion"),
              std::string::npos);
}

TEST(DoctorKernelImages, WithoutADeviceSaysWhatIsEmbedded) {
    json fp = with_device_and_images(
        "9.0", {image("sass", 90, "arch_specific"), image("ptx", 100, "family", 9, 0)});
    fp["libraries"]["cuda"]["devices"] = json::array();
    const diagnosis d = diagnose(fp);
    ASSERT_NE(find(d, "kernel-images"), nullptr);
    EXPECT_NE(find(d, "kernel-images")->title.find("sm_90a"), std::string::npos);
    EXPECT_NE(find(d, "kernel-images")->title.find("compute_100f"), std::string::npos);
}

TEST(Doctor, BrokenProbeAndGarbageFactsNeverThrow) {
    json fp = healthy();
    fp["libraries"] = {{"probe_error", "exit 127"},
                       {"probe_output", "pitfall-probe: error while loading shared libraries: "
                                        "libcudart.so.13: cannot open shared object file"}};
    diagnosis d = diagnose(fp);
    ASSERT_NE(find(d, "probe-failed"), nullptr);
    EXPECT_NE(find(d, "probe-failed")->fix.find("libcudart.so.13"), std::string::npos);
    for (const json& garbage : {json(), json(5), json::array({1, 2}),
                                json{{"libraries", {{"driver", "x"}, {"cuda", {{"devices", 3}}}}}},
                                json{{"build_images", {{"p", {{"images", {1, {{"arch", -3}}}}}}}}},
                                json{{"libraries", {{"nvml", {{"devices", {1, "a", nullptr}}}}}},
                                     {"environment", {{"CUDA_VISIBLE_DEVICES", 7}}}}})
        EXPECT_NO_THROW(d = diagnose(garbage)) << garbage.dump();
}

TEST(Doctor, JsonFollowsItsSchemaAndEveryIdIsExplained) {
    json fp = healthy();
    fp["libraries"]["cudnn"]["loaded_version"] = 91400;
    fp["environment"]["CUDA_VISIBLE_DEVICES"] = "0,9";
    const json out = diagnose(fp).to_json();
    const auto why = pitfall::detail::schema_named("doctor").first_error(out);
    EXPECT_FALSE(why.has_value()) << *why;
    for (const auto& f : out["findings"])
        EXPECT_TRUE(find_rule(f["id"].get<std::string>()).has_value()) << f["id"];
    EXPECT_FALSE(out["cuda_usable"].get<bool>());
}

// ---- the registry: every rule complete, documented, reproducible, and the only source of ids ----

/// `fp` with the value at a JSON pointer ("/libraries/driver/cu_init") replaced.
json with(json fp, const char* pointer, json value) {
    fp[json::json_pointer(pointer)] = std::move(value);
    return fp;
}

/// Machines that, between them, make every rule fire (DoctorRegistry.EveryRuleFiresSomewhere
/// says which one a new rule still needs).
std::vector<json> synthetic_machines() {
    json no_driver = healthy();
    no_driver["libraries"]["driver"] = {{"load_error", "libcuda.so.1: cannot open shared object"},
                                        {"device_nodes", json::array()}};
    json busy_gpu = healthy();
    auto& dev = busy_gpu["libraries"]["nvml"]["devices"][0];
    dev["memory"]["used_bytes"] = 60LL << 30;
    dev["compute_processes"] = 2;
    dev["compute_mode"] = 2;
    dev["mig_mode"] = {{"current", 1}, {"pending", 1}};
    dev["persistence_mode"] = false;
    dev["remapped_rows"] = {{"pending", true}, {"failure", false}};
    dev["clocks_throttle_reasons"] = 0x41;
    const json compat = with(healthy(), "/libraries/driver/path",
                             "/usr/local/cuda-13.0/compat/libcuda.so.580.65.06");
    return {
        healthy(),
        with(healthy(), "/libraries", {{"probe_error", "exit 127"}}),
        with(healthy(), "/libraries/built_with_cuda", false),
        no_driver,
        with(with(healthy(), "/libraries/driver/load_error", "libcuda.so.1: cannot open"),
             "/host/container/in_container", true),
        with(healthy(), "/libraries/driver/cu_init", "CUDA_ERROR_STUB_LIBRARY"),
        with(healthy(), "/libraries/driver/cu_init", "CUDA_ERROR_NO_DEVICE"),
        with(healthy(), "/libraries/driver/cu_init", "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH"),
        with(compat, "/libraries/driver/kernel_module/version", "535.216.01"),
        with(compat, "/libraries/driver/kernel_module/version", "550.127.05"),
        with(healthy(), "/libraries/cuda/driver_version", 12020),
        with(with(healthy(), "/libraries/cuda/runtime_version", 12080),
             "/libraries/cuda/driver_version", 12040),
        with(healthy(), "/environment/CUDA_VISIBLE_DEVICES", ""),
        with(healthy(), "/environment/CUDA_VISIBLE_DEVICES", "7"),
        with(healthy(), "/environment/CUDA_VISIBLE_DEVICES", "MIG-1b2c3d4e"),
        with(healthy(), "/libraries/nvml/device_count", 2),
        with(healthy(), "/libraries/cublas/load_error", "libcublas.so.13: cannot open"),
        with(healthy(), "/libraries/cudnn", {{"load_error", "libcudnn.so.9: cannot open"}}),
        with(healthy(), "/libraries/cudnn/sublibrary_checks/cudnnOpsVersionCheck", "SIGABRT"),
        with(healthy(), "/libraries/loader_path_copies",
             {{"libcudnn.so.9",
               {{{"file", "/venv/libcudnn.so.9"}, {"version", "9"}},
                {{"file", "/usr/lib/libcudnn.so.9.1.0"}, {"version", "9.1.0"}}}}}),
        with(healthy(), "/libraries/nvml", {{"load_error", "libnvidia-ml.so.1: cannot open"}}),
        busy_gpu,
        with_device_and_images("10.3", {image("sass", 100, "arch_specific")}),
        with_device_and_images("12.0", {image("ptx", 90, "plain", 9, 0)}, 12040),
        with_device_and_images("10.3", {image("ptx", 100, "family", 9, 0)}),
        with_device_and_images("9.0", {image("sass", 90, "plain")}),
        with(healthy(), "/environment/CUDA_LAUNCH_BLOCKING", "1"),
        // What toolkit_facts writes (doctor_toolkit_test.cpp runs real nvcc scripts for it).
        with(healthy(), "/toolkits",
             {{"path", {{"nvcc", "/usr/local/cuda-12.4/bin/nvcc"}, {"release", "12.4"}}}}),
        with(healthy(), "/toolkits",
             {{"path", {{"nvcc", "/usr/local/cuda-13.0/bin/nvcc"}, {"release", "13.0"}}}}),
    };
}

/// The source tree this test was built from (the docs and scenario.json files it reads).
std::filesystem::path source_tree() {
    return PITFALL_SOURCE_DIR;
}

/// The anchors GitHub gives the headings of a Markdown file: lower case, punctuation dropped,
/// spaces as hyphens ("### CUDA visible devices" -> cuda-visible-devices).
std::set<std::string> github_anchors(const std::filesystem::path& markdown) {
    std::set<std::string> anchors;
    std::ifstream in(markdown);
    for (std::string line; std::getline(in, line);) {
        const auto text = line.find_first_not_of('#');
        if (text == 0 || text == std::string::npos || line[text] != ' ')
            continue;
        std::string anchor;
        for (const char c : line.substr(text + 1)) {
            const char lower = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
            if (std::isalnum(static_cast<unsigned char>(lower)) || lower == '-' || lower == '_')
                anchor += lower;
            else if (lower == ' ')
                anchor += '-';
        }
        anchors.insert(anchor);
    }
    return anchors;
}

/// Whether "backend.scenario.variant" is a variant of that scenario that runs on that backend.
bool is_scenario_variant(const std::filesystem::path& tree, const std::string& case_id) {
    const auto first = case_id.find('.');
    const auto last = case_id.rfind('.');
    if (first == std::string::npos || first == last)
        return false;
    const std::string backend = case_id.substr(0, first);
    const std::string scenario = case_id.substr(first + 1, last - first - 1);
    std::ifstream in(tree / "scenarios" / scenario / "scenario.json");
    std::stringstream text;
    text << in.rdbuf();
    auto m = pitfall::parse_manifest(text.str(), scenario + "/scenario.json");
    if (!in || !m.is_ok())
        return false;
    const auto* variant = m->find_variant(case_id.substr(last + 1));
    if (variant == nullptr)
        return false;
    const auto backends = m->backends_of(*variant);
    return std::find(backends.begin(), backends.end(), backend) != backends.end();
}

std::vector<const pitfall::runner::doctor::rule*> every_rule() {
    std::vector<const pitfall::runner::doctor::rule*> rules;
    for (const auto& check : pitfall::runner::doctor::registry())
        rules.insert(rules.end(), check.rules.begin(), check.rules.end());
    return rules;
}

TEST(DoctorRegistry, EveryRuleIsDocumentedOnce) {
    std::set<std::string> ids;
    for (const auto* r : every_rule()) {
        ASSERT_NE(r->id, nullptr);
        EXPECT_NE(std::string(r->id), "");
        EXPECT_TRUE(ids.insert(r->id).second) << "two rules are called " << r->id;
        EXPECT_NE(std::string(r->explain.checks), "") << r->id;
        // A rule that only ever reports all is well has no why to give.
        if (r->severity != finding_severity::ok) {
            EXPECT_NE(std::string(r->explain.why), "") << r->id;
        }
        for (const auto& error : r->explained_errors)
            EXPECT_EQ(error.rfind("cudaError", 0), 0u) << r->id << ": " << error;
    }
    EXPECT_EQ(doctor_rules().size(), ids.size()) << "--explain lists every rule, once";
    for (const auto& doc : doctor_rules()) {
        const auto found = find_rule(doc.id);
        ASSERT_TRUE(found.has_value()) << doc.id;
        EXPECT_EQ(found->rule, doc.rule);
    }
}

TEST(DoctorRegistry, AnchorsAndCasesExist) {
    const auto tree = source_tree();
    const auto anchors = github_anchors(tree / "docs" / "cuda-rules.md");
    ASSERT_FALSE(anchors.empty()) << tree / "docs" / "cuda-rules.md";
    for (const auto* r : every_rule()) {
        EXPECT_EQ(anchors.count(r->anchor), 1u) << r->id << ": docs/cuda-rules.md#" << r->anchor;
        const std::string case_id = r->reproduced_by;
        if (case_id != pitfall::runner::doctor::no_reproducing_case) {
            EXPECT_TRUE(is_scenario_variant(tree, case_id)) << r->id << ": " << case_id;
        }
    }
}

TEST(DoctorRegistry, EveryFindingComesFromItsRecord) {
    for (const json& fp : synthetic_machines())
        for (const auto& f : diagnose(fp).findings) {
            const auto* r = pitfall::runner::doctor::rule_named(f.id);
            ASSERT_NE(r, nullptr) << "unregistered id " << f.id;
            EXPECT_EQ(f.rule, r->link()) << f.id;
            EXPECT_EQ(f.reproduced_by, r->reproduced_by) << f.id;
            EXPECT_NE(f.title, "") << f.id;
            if (f.severity != finding_severity::ok) {
                EXPECT_NE(f.why, "") << f.id << ": a problem says why it matters";
                EXPECT_NE(f.fix, "") << f.id << ": a problem says what to do";
            }
        }
}

TEST(DoctorRegistry, EveryRuleFiresSomewhere) {
    std::set<std::string> fired;
    for (const json& fp : synthetic_machines())
        for (const auto& f : diagnose(fp).findings)
            fired.insert(f.id);
    for (const auto* r : every_rule())
        EXPECT_EQ(fired.count(r->id), 1u) << r->id << " fires on none of synthetic_machines()";
}

TEST(DoctorRegistry, ExplainedErrorsComeFromTheRules) {
    const diagnosis stub = diagnose(with(healthy(), "/libraries/driver/cu_init", "CUresult 34"));
    EXPECT_EQ(stub.explained_errors(), std::vector<std::string>{"cudaErrorStubLibrary"});
    const diagnosis hidden = diagnose(with(healthy(), "/environment/CUDA_VISIBLE_DEVICES", "9"));
    EXPECT_EQ(hidden.explained_errors(),
              (std::vector<std::string>{"cudaErrorNoDevice", "cudaErrorInvalidDevice"}));
    // A warning explains nothing: GPU 0 stays visible.
    EXPECT_TRUE(diagnose(with(healthy(), "/environment/CUDA_VISIBLE_DEVICES", "0,9"))
                    .explained_errors()
                    .empty());
}

} // namespace
