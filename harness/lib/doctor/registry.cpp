#include "doctor/registry.hpp"

namespace pitfall::runner {
namespace doctor {

std::string rule::link() const {
    return std::string("docs/cuda-rules.md#") + anchor;
}

finding rule::found(std::string title, std::string observed) const {
    return {id,       severity, std::move(title), std::move(observed),
            says.why, says.fix, reproduced_by,    link()};
}

const std::vector<check>& registry() {
    // The order diagnose() runs them, which is the order of the findings within a severity.
    static const std::vector<check> checks = {
        probe_check(),           // anything known at all
        build_check(),           // CUDA in this build
        driver_library_check(),  // libcuda.so.1: missing, the stub, no device, refusing to start
        driver_version_check(),  // the driver against the runtime
        visible_devices_check(), // CUDA_VISIBLE_DEVICES
        device_order_check(),    // CUDA_DEVICE_ORDER
        cublas_check(),          // cuBLAS on the loader's path
        cudnn_check(),           // cuDNN: present, its version, its sub-libraries
        loader_copies_check(),   // two copies of one library
        nvml_check(),            // NVML's view of each GPU
        pageable_memory_check(), // HMM/ATS
        cuda_env_check(),        // variables that alter every CUDA program
        kernel_images_check(),   // this build's SASS and PTX against the devices
        toolkit_check(),         // nvcc on PATH and in CUDA_HOME against the runtime
    };
    return checks;
}

const rule* rule_named(const std::string& id) {
    for (const auto& c : registry())
        for (const rule* r : c.rules)
            if (r->id == id)
                return r;
    return nullptr;
}

} // namespace doctor

const std::vector<rule_doc>& doctor_rules() {
    static const std::vector<rule_doc> docs = [] {
        std::vector<rule_doc> all;
        for (const auto& c : doctor::registry())
            for (const doctor::rule* r : c.rules)
                all.push_back({r->id, r->explain.checks, r->explain.why, r->explain.fix,
                               r->reproduced_by, r->link()});
        return all;
    }();
    return docs;
}

std::optional<rule_doc> find_rule(const std::string& id) {
    for (const auto& r : doctor_rules())
        if (r.id == id)
            return r;
    return std::nullopt;
}

} // namespace pitfall::runner
