// The scenario index: load_index and locate's "paths" on a file of the fuzzer's bytes; the
// manifests it may name are looked up (a missing one is an error like any other).
#include "fuzz_common.hpp"
#include "model/locate.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string path = pitfall::fuzz::scratch() + "/pitfall-index.json";
    pitfall::fuzz::write_bytes(path, data, size);
    auto index = pitfall::runner::load_index(path);
    if (index.is_ok()) {
        pitfall::runner::case_filter all;
        (void)pitfall::runner::select_cases(index.value(), all);
    }
    (void)pitfall::runner::locate(path, "");
    return 0;
}
