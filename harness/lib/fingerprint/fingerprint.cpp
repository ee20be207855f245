#include "fingerprint/fingerprint.hpp"
#include "util/json_member.hpp"

#include "util/fnv1a.hpp"

#include "doctor/doctor.hpp"
#include "fingerprint/host_identity.hpp"
#include "pitfall/detail/json_file.hpp"

#include "pitfall/detail/process.hpp"
#include "pitfall/detail/result_file.hpp"
#include "pitfall/detail/text.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <thread>
#include <tuple>
#include <unistd.h>

namespace pitfall::runner {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {
// docs/cuda-rules.md#environment-variables: variables that change what CUDA does, DCGM's
// performance-limiting list among them, plus our own budget and the loader path that decides
// which libraries load.
constexpr const char* behaviour_env[] = {
    "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "CUDA_MODULE_LOADING", "CUDA_LAUNCH_BLOCKING",
    "CUDA_FORCE_PTX_JIT", "CUDA_DISABLE_PTX_JIT", "CUDA_CACHE_DISABLE", "CUDA_CACHE_PATH",
    "NVIDIA_TF32_OVERRIDE", "CUDA_INJECTION64_PATH", "CUDA_INJECTION32_PATH",
    "NSIGHT_CUDA_DEBUGGER", "CUDA_AUTO_BOOST", "CUDA_ENABLE_COREDUMP_ON_EXCEPTION",
    "CUDA_COREDUMP_FILE", "CUDA_DEVICE_WAITS_ON_EXCEPTION", "CUDA_PROFILE", "COMPUTE_PROFILE",
    "OPENCL_PROFILE", "NVIDIA_DRIVER_CAPABILITIES", "CUDA_DEVICE_MAX_CONNECTIONS",
    "CUDA_MPS_PIPE_DIRECTORY", "NVIDIA_VISIBLE_DEVICES", "LD_LIBRARY_PATH", "LD_PRELOAD",
    "PITFALL_DEVICE_MEMORY_LIMIT",
    // The CPU's speed: which kernels OpenBLAS runs, and
    // threads (each case's own are set by the harness).
    "OPENBLAS_CORETYPE", "OPENBLAS_VERBOSE", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS",
    "OMP_PROC_BIND", "GOMP_CPU_AFFINITY", "MKL_NUM_THREADS"};

std::string first_line_with(const std::string& path, const std::string& prefix) {
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);)
        if (line.rfind(prefix, 0) == 0)
            return detail::valid_utf8(line.substr(prefix.size()));
    return {};
}

std::string trim_quotes(std::string s) {
    if (s.size() >= 2 && s.front() == '"' && s.back() == '"')
        s = s.substr(1, s.size() - 2);
    return s;
}

// Distinct (physical id, core id) pairs; the thread count where /proc/cpuinfo has neither.
unsigned physical_cores() {
    std::ifstream in("/proc/cpuinfo");
    std::set<std::pair<std::string, std::string>> cores;
    std::string physical;
    for (std::string line; std::getline(in, line);) {
        const auto colon = line.find(':');
        if (colon == std::string::npos)
            continue;
        const std::string value = colon + 2 <= line.size() ? line.substr(colon + 2) : "";
        if (line.rfind("physical id", 0) == 0)
            physical = value;
        else if (line.rfind("core id", 0) == 0)
            cores.emplace(physical, value);
    }
    return cores.empty() ? std::thread::hardware_concurrency()
                         : static_cast<unsigned>(cores.size());
}

json container_facts() {
    json c = {{"in_container", false}};
    if (access("/run/.containerenv", F_OK) == 0) {
        c = {{"in_container", true}, {"engine", "podman"}};
        const std::string image = first_line_with("/run/.containerenv", "image=");
        if (!image.empty())
            c["image"] = trim_quotes(image);
    } else if (access("/.dockerenv", F_OK) == 0) {
        c = {{"in_container", true}, {"engine", "docker"}};
    } else if (const char* env = std::getenv("container")) {
        c = {{"in_container", true}, {"engine", detail::valid_utf8(env)}};
    } else if (const char* bundle = std::getenv("SLURM_CONTAINER")) {
        // A step started by Slurm's own OCI support (srun --container=BUNDLE) is told its
        // bundle; nothing else in it need say "container".
        c = {
            {"in_container", true}, {"engine", "slurm-oci"}, {"image", detail::valid_utf8(bundle)}};
    }
    if (const char* image = std::getenv("PITFALL_CONTAINER_IMAGE"))
        c["image"] = detail::valid_utf8(image); // set by our own container recipes
    return c;
}
} // namespace

namespace {
std::string boot_id() {
    std::ifstream in("/proc/sys/kernel/random/boot_id");
    std::string id;
    std::getline(in, id);
    return id;
}

double unix_now() {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

} // namespace

std::string file_stamp(const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0)
        return "";
    return std::to_string(st.st_size) + ":" + std::to_string(st.st_mtim.tv_sec) + "." +
           std::to_string(st.st_mtim.tv_nsec) + ":" + std::to_string(st.st_ino);
}

namespace {

/// Every absolute path of a file the probe's answer names (libraries it loaded, the driver's
/// files), with its stamp: the answer holds while they are unchanged.
void stamp_files(const json& j, json& files, int depth = 0) {
    if (depth > 16)
        return;
    if (j.is_string()) {
        const std::string& text = j.get_ref<const std::string&>();
        if (text.size() > 1 && text.size() < 4096 && text[0] == '/' && files.size() < 256)
            if (std::string stamp = file_stamp(text); !stamp.empty())
                files[text] = stamp;
    } else if (j.is_structured()) {
        for (const auto& item : j)
            stamp_files(item, files, depth + 1);
    }
}

/// A kept answer for `path` that still holds, else null: the same boot, young enough, every
/// file it names unchanged. Anything unreadable or malformed is no answer (the probe runs).
/// /dev/nvidia* now, sorted, as the probe lists them (driver.device_nodes).
json nvidia_device_nodes() {
    std::vector<std::string> names;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator("/dev", ec))
        if (const std::string name = e.path().filename().string(); name.rfind("nvidia", 0) == 0)
            names.push_back("/dev/" + name);
    std::sort(names.begin(), names.end());
    json out = json::array();
    for (const auto& n : names)
        out.push_back(detail::valid_utf8(n));
    return out;
}

/// Whether a kept answer's driver facts are what the kernel shows now: the NVIDIA module
/// (/proc/driver/nvidia/version) loaded or not, the same /dev/nvidia* nodes, and a node for
/// each CUDA device it counts. The answer's folder is this user's, so a case (this user too)
/// can write it; it cannot load a module or make device nodes, so a planted answer that
/// claims GPUs on a machine without them (choosing a GPU profile) is not reused.
bool what_the_kernel_shows(const json& libraries) {
    const json* driver = libraries.contains("driver") ? &libraries["driver"] : nullptr;
    if (driver == nullptr || !driver->is_object() || !driver->contains("kernel_module") ||
        !(*driver)["kernel_module"].is_object())
        return false;
    const json& module = (*driver)["kernel_module"];
    const bool loaded_now = ::access("/proc/driver/nvidia/version", F_OK) == 0;
    if (!module.contains("loaded") || module["loaded"] != json(loaded_now))
        return false;
    const json nodes = nvidia_device_nodes();
    if (!driver->contains("device_nodes") || (*driver)["device_nodes"] != nodes)
        return false;
    std::size_t gpu_nodes = 0;
    for (const auto& n : nodes) {
        const std::string name = n.get<std::string>().substr(std::strlen("/dev/nvidia"));
        gpu_nodes += !name.empty() && std::all_of(name.begin(), name.end(),
                                                  [](char c) { return c >= '0' && c <= '9'; });
    }
    const json* cuda = libraries.contains("cuda") ? &libraries["cuda"] : nullptr;
    if (cuda == nullptr || !cuda->is_object())
        return false;
    const json count = cuda->value("device_count", json(0));
    return count.is_number_integer() && count.get<long long>() >= 0 &&
           static_cast<std::size_t>(count.get<long long>()) <= gpu_nodes;
}

json reusable_answer(const std::string& path, double& age) {
    auto text = detail::read_regular_file(path, std::size_t{4} << 20);
    if (!text.is_ok())
        return json();
    auto doc = detail::parse_json(text.value(), path);
    if (!doc.is_ok() || !doc.value().is_object())
        return json();
    const json& d = doc.value();
    if (d.value("schema", "") != "pitfall.probe-answer/1" || !d.contains("boot_id") ||
        d["boot_id"] != boot_id() || !d.contains("taken_at_unix") ||
        !d["taken_at_unix"].is_number() || !d.contains("files") || !d["files"].is_object() ||
        !d.contains("libraries") || !d["libraries"].is_object())
        return json();
    age = unix_now() - d["taken_at_unix"].get<double>();
    if (!(age >= 0 && age <= probe_cache_seconds))
        return json();
    for (const auto& [file, stamp] : d["files"].items())
        if (!stamp.is_string() || file_stamp(file) != stamp.get<std::string>())
            return json();
    if (!what_the_kernel_shows(d["libraries"]))
        return json();
    return d["libraries"];
}

/// Runs the probe; its JSON, or {"probe_error": ...} saying why there is none.
json run_probe(const std::string& probe_program, const std::string& log_dir, double probe_seconds) {
    const std::string probe_out = log_dir + "/probe.log";
    process_request req;
    req.argv = {probe_program};
    req.output_path = probe_out;
    // CTest gives a case its timeout + 90 s: the default 30 s fits in that; the gate gives less.
    req.timeout_seconds = probe_seconds;
    const auto outcome = run_process(req);
    const std::string text = read_tail(probe_out, 1 << 20);
    json libraries;
    if (outcome.started && outcome.exit_code && *outcome.exit_code == 0) {
        // The loader or a library may print warnings first (cuDNN's own contain braces:
        // "Unable to load any of {libcudnn_ops.so.9, ...}"): the probe's JSON starts at the
        // first '{' that opens a line.
        const std::size_t at = text.rfind('{', 0) == 0 ? 0 : text.find("\n{");
        auto parsed =
            detail::parse_json(at == std::string::npos ? text : text.substr(at), "probe output");
        if (parsed.is_ok() && parsed.value().is_object())
            libraries = std::move(parsed).value();
        else
            libraries = {{"probe_error", "unreadable probe output: " +
                                             (parsed.is_ok() ? std::string("not an object")
                                                             : parsed.error().message())}};
    } else {
        // A timeout first: the TERM that ended it was ours (a GPU library whose load hangs).
        std::ostringstream limit;
        limit << "timed out after " << probe_seconds
              << " s (a library it loads hangs as it loads?)";
        std::string why = !outcome.started    ? outcome.start_error
                          : outcome.timed_out ? limit.str()
                          : outcome.signal
                              ? "ended by " + signal_name(*outcome.signal)
                              : "exit " + std::to_string(outcome.exit_code.value_or(-1));
        libraries = {{"probe_error", why}, {"probe_output", detail::utf8_head(text, 2000)}};
    }
    return libraries;
}
} // namespace

std::string shared_folder(std::string& why) {
    const char* chosen = std::getenv("PITFALL_RUNTIME_DIR");
    std::string dir;
    if (chosen != nullptr && *chosen != '\0') {
        dir = chosen;
    } else if (const char* runtime = std::getenv("XDG_RUNTIME_DIR");
               runtime != nullptr && *runtime == '/') {
        dir = std::string(runtime) + "/pitfall";
    } else {
        dir = "/tmp/pitfall-" + std::to_string(::geteuid());
    }
    ::mkdir(dir.c_str(), 0700);
    struct stat st {};
    // Our own folder, closed to others: a probe answer another user could plant would choose
    // the profile that judges this run, and a lock they hold would stall it.
    if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid() ||
        (st.st_mode & 077) != 0) {
        why = dir + " is not a folder of this user's closed to others";
        return "";
    }
    return dir;
}

std::string probe_cache_file(const std::string& probe_program, std::string& why) {
    if (const char* keep = std::getenv("PITFALL_PROBE_CACHE");
        keep != nullptr && std::string(keep) == "off") {
        why = "PITFALL_PROBE_CACHE=off";
        return "";
    }
    const std::string dir = shared_folder(why);
    if (dir.empty())
        return "";
    std::string key = probe_program + '\n' + file_stamp(probe_program) + '\n' +
                      std::to_string(::geteuid()) + '\n';
    for (const char* name : behaviour_env) {
        const char* value = std::getenv(name);
        key += std::string(name) + (value != nullptr ? "=" + std::string(value) : "") + '\n';
    }
    return dir + "/probe-" + hex16(fnv1a(key)) + ".json";
}

json kept_build_images(const std::vector<std::pair<std::string, std::string>>& programs) {
    std::string why;
    const char* keep = std::getenv("PITFALL_PROBE_CACHE");
    const std::string dir =
        keep != nullptr && std::string(keep) == "off" ? std::string() : shared_folder(why);
    if (dir.empty())
        return build_images(programs);
    // One file per set of programs (a build), holding the stamps it was read under.
    std::string key = std::to_string(::geteuid()) + '\n';
    json stamps = json::object();
    for (const auto& [name, path] : programs) {
        key.append(name).append(1, '\t').append(path).append(1, '\n');
        stamps[name] = file_stamp(path);
    }
    const std::string cache = dir + "/build-images-" + hex16(fnv1a(key)) + ".json";
    if (auto text = detail::read_regular_file(cache, std::size_t{16} << 20); text.is_ok())
        if (auto doc = detail::parse_json(text.value(), cache); doc.is_ok()) {
            const json& d = doc.value();
            if (d.is_object() && d.value("schema", "") == "pitfall.build-images/1" &&
                d.contains("stamps") && d["stamps"] == stamps && d.contains("images") &&
                d["images"].is_object())
                return d["images"];
        }
    json images = build_images(programs);
    (void)write_file_atomically(
        cache, detail::dump_safe(
                   {{"schema", "pitfall.build-images/1"}, {"stamps", stamps}, {"images", images}}));
    return images;
}

json take_fingerprint(const std::string& probe_program, const std::string& log_dir,
                      bool reuse_probe, double probe_seconds) {
    json fp = {{"schema", "pitfall.fingerprint/1"}};
    std::string why_not;
    const std::string cache = reuse_probe ? probe_cache_file(probe_program, why_not) : "";
    double age = 0;
    json libraries = cache.empty() ? json() : reusable_answer(cache, age);
    json probe = {{"reused", !libraries.is_null()}};
    if (!libraries.is_null()) {
        probe["age_seconds"] = age;
        probe["cache"] = cache;
        // Written like every file of the run folder: never through a link put in its place.
        std::ostringstream note;
        note << "the probe's answer of " << age << " s ago, kept in " << cache << '\n';
        (void)write_file_atomically(log_dir + "/probe.log", note.str());
    } else {
        libraries = run_probe(probe_program, log_dir, probe_seconds);
        const double taken = unix_now();
        // Kept only when the probe answered: a failed probe is run again next time.
        if (!cache.empty() && libraries.is_object() && !libraries.contains("probe_error")) {
            json files = json::object();
            stamp_files(libraries, files);
            // The folders the loader searches, present or not: a driver installed since (a
            // no-driver answer names no libcuda to stamp), a folder created on LD_LIBRARY_PATH,
            // or another view of a folder (a mount namespace with the stub overlaid, as a
            // container or a second node on the same machine has) each make the answer stale.
            for (const auto& dir : libraries.value("loader_folders", json::array()))
                if (dir.is_string() && !dir.get<std::string>().empty() &&
                    dir.get<std::string>()[0] == '/' && files.size() < 512)
                    files[dir.get<std::string>()] = file_stamp(dir.get<std::string>());
            const json answer = {{"schema", "pitfall.probe-answer/1"},
                                 {"boot_id", boot_id()},
                                 {"taken_at_unix", taken},
                                 {"files", files},
                                 {"libraries", libraries}};
            if (write_file_atomically(cache, detail::dump_safe(answer)).is_ok())
                probe["cache"] = cache;
        } else if (reuse_probe && cache.empty()) {
            probe["not_kept"] = why_not;
        }
    }
    fp["probe"] = probe;
    fp["libraries"] = libraries;

    struct utsname uts {};
    uname(&uts);
    std::string cpu_model = first_line_with("/proc/cpuinfo", "model name\t: ");
    fp["host"] = {
        {"cpu_model", cpu_model},
        {"cpu_threads", std::thread::hardware_concurrency()},
        {"cpu_cores", physical_cores()},
        {"os", trim_quotes(first_line_with("/etc/os-release", "PRETTY_NAME="))},
        {"kernel", std::string(uts.sysname) + " " + uts.release},
        {"machine", uts.machine},
#if defined(__clang__)
        {"harness_compiler", std::string("clang ") + __clang_version__},
#else
        {"harness_compiler", std::string("gcc ") + __VERSION__},
#endif
        {"container", container_facts()}
    };
    json env = json::object();
    for (const char* name : behaviour_env)
        if (const char* value = std::getenv(name))
            env[name] = detail::valid_utf8(value); // recorded, bytes that are not text too
    fp["environment"] = env;
    // Which machine this is, apart from what kind: absolute times hold only here.
    fp["host"]["identity"] = host_identity(fp);
    return fp;
}

namespace {
/// j[key], or null where j is no object or lacks it: the probe's JSON is read, not trusted.
std::string text_or(const json& v, const std::string& fallback) {
    return v.is_string() ? v.get<std::string>() : fallback;
}

/// driver_branch (580 of 580.65.06: NVML's driver version, else the kernel module's) and mig
/// (NVML's current MIG mode of the first device, else a MIG instance's device name), where
/// the probe learned them.
void add_driver_and_mig_facts(const json& lib, json& s) {
    const json& nvml = member(lib, "nvml");
    int branch = branch_of(text_or(member(nvml, "driver_version"), ""));
    if (branch == 0)
        branch = branch_of(
            text_or(member(member(member(lib, "driver"), "kernel_module"), "version"), ""));
    if (branch > 0)
        s["driver_branch"] = branch;
    const json& nvml_devices = member(nvml, "devices");
    const json mig_current = nvml_devices.is_array() && !nvml_devices.empty()
                                 ? member(member(nvml_devices[0], "mig_mode"), "current")
                                 : json();
    if (mig_current.is_number_integer())
        s["mig"] = mig_current.get<long long>() == 1; // NVML_DEVICE_MIG_ENABLE
    else if (s.contains("device_name") && s["device_name"].is_string())
        // A MIG instance as CUDA lists it: "NVIDIA A100-SXM4-40GB MIG 1g.5gb".
        s["mig"] = s["device_name"].get<std::string>().find(" MIG ") != std::string::npos;
}
} // namespace

json fingerprint_summary(const json& fp) {
    const json& lib = member(fp, "libraries");
    const json& cuda = member(lib, "cuda");
    const json& cudnn = member(lib, "cudnn");
    const json& host = member(fp, "host");
    // Only what the probe really learned: a fact it could not read stays out, so no profile
    // matches on a guess (a probe that failed must not look like "no GPU here").
    const bool built_with_cuda =
        member(lib, "built_with_cuda").is_boolean() && member(lib, "built_with_cuda").get<bool>();
    const json& in_container = member(member(host, "container"), "in_container");
    json s = {{"built_with_cuda", built_with_cuda},
              {"os", text_or(member(host, "os"), "")},
              {"in_container", in_container.is_boolean() && in_container.get<bool>()}};
    for (const auto& [key, from, field] :
         {std::tuple<const char*, const json*, const char*>{"gpu_count", &cuda, "device_count"},
          {"cuda_driver_version", &cuda, "driver_version"},
          {"cuda_runtime_version", &cuda, "runtime_version"},
          {"cudnn_version", &cudnn, "loaded_version"}})
        if (const json& v = member(*from, field); v.is_number() || v.is_string())
            s[key] = v;
    if (cuda.is_object() && cuda.contains("device_error"))
        s["cuda_error"] = text_or(member(cuda["device_error"], "error"), "");
    const json& devices = member(cuda, "devices");
    if (devices.is_array() && !devices.empty()) {
        s["device_name"] = text_or(member(devices[0], "name"), "");
        s["compute_capability"] = text_or(member(devices[0], "compute_capability"), "");
        // What changes behaviour on one GPU model: kernels reading pageable host memory
        // (HMM/ATS), whether a second process may open a context, MIG.
        if (const json& v = member(devices[0], "pageable_memory_access"); v.is_boolean())
            s["pageable_memory_access"] = v;
        if (const json& v = member(devices[0], "compute_mode");
            v.is_string() && v.get<std::string>() != "unknown")
            s["compute_mode"] = v;
    }
    add_driver_and_mig_facts(lib, s);
    if (s.contains("cuda_driver_version") && s["cuda_driver_version"].is_number_integer())
        s["cuda_driver_major"] = s["cuda_driver_version"].get<long long>() / 1000;
    // Host-only: nothing here can run a CUDA case (no CUDA build, no driver, or no device).
    const json gpus = s.value("gpu_count", json(0));
    s["host_only"] = !built_with_cuda || !gpus.is_number() || gpus.get<double>() == 0;
    s["cpu_model"] = text_or(member(host, "cpu_model"), "");
    // The BLAS the CPU cases run on: its release ("OpenBLAS 0.3.21" of the build string) and
    // the kernel type it chose (or OPENBLAS_CORETYPE forced), both speeds of their own.
    const json& blas = member(lib, "openblas");
    if (const json& config = member(blas, "config"); config.is_string()) {
        const std::string text = config.get<std::string>();
        const auto second_space = text.find(' ', text.find(' ') + 1);
        s["blas_library"] = text.substr(0, second_space);
    }
    if (const json& core = member(blas, "core"); core.is_string())
        s["blas_core"] = core;
    const json& threads = member(host, "cpu_threads");
    s["cpu_threads"] = threads.is_number_integer() ? threads : json(0);
    return s;
}

std::string fingerprint_id(const json& summary) {
    // FNV-1a over the summary's canonical text (nlohmann orders keys): the same machine, stack
    // and build flavour give the same id; any fact that changes speed changes it.
    return fnv1a_hex(detail::dump_safe(summary));
}

} // namespace pitfall::runner
