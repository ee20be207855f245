// pitfall-probe: prints, as JSON, what the CUDA and cuDNN libraries say about themselves and
// the devices. It runs as a child of the harness, so a missing library (the loader stops it
// before main) or a broken driver cannot take the harness down; every value comes from the
// libraries' own calls, never from tools on PATH.
#include "probe.hpp"

#include "pitfall/detail/loaded_libraries.hpp"
#include "pitfall/detail/process.hpp"

#include <nlohmann/json.hpp>

#include <exception>
#include <iostream>

int main() try {
    using namespace pitfall::probe;
    using nlohmann::json;
    if (!pitfall::ensure_standard_descriptors()) // its answer goes to stdout: 1 must be a pipe's
        return 2;
    json out = {{"schema", "pitfall.probe/1"}, {"built_with_cuda", PITFALL_HAS_CUDA != 0}};
    // The driver first, by its own API: what the runtime's calls below answer follows from it.
    out["driver"] = driver_facts();
    out["nvml"] = nvml_facts();
    out["openblas"] = openblas_facts();
#if PITFALL_HAS_CUDA
    out["cuda"] = cuda_facts();
    out["cublas"] = cublas_facts();
#else
    out["cuda"] = {{"unavailable", "built without CUDA"}};
#endif
#if PITFALL_HAS_CUDNN
    out["cudnn"] = cudnn_facts();
#else
    out["cudnn"] = {{"unavailable", "built without cuDNN"}};
#endif
    // After every library above is opened (each is left loaded): the list names them all.
    out["loaded_libraries"] = loaded_libraries();
    // The same as a case records it (name, path, real path, version): what a run compares its
    // cases' libraries with.
    out["loaded_library_files"] =
        pitfall::detail::loaded_libraries_json(pitfall::detail::read_loaded_libraries());
    out["loader_path_copies"] = loader_path_copies();
    out["loader_folders"] = loader_folders(); // stamped with a kept answer: see fingerprint.cpp
    std::cout << out.dump(2, ' ', false, json::error_handler_t::replace) << '\n';
    return 0;
} catch (const std::exception& e) { // a bug or the system (memory): said, and the harness
    std::cerr << "pitfall-probe: error: " << e.what() << '\n'; // records the probe as failed
    return 2;
}
