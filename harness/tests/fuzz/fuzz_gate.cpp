// A gate document (`pitfall gate --json`), as `pitfall export --openmetrics` reads it: told
// apart by content, checked against reports/schema/gate.schema.json, then rendered as metrics.
#include "fuzz_common.hpp"
#include "report/openmetrics.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static const std::string path = pitfall::fuzz::scratch() + "/gate.json";
    pitfall::fuzz::write_bytes(path, data, size);
    (void)pitfall::runner::metrics_of(path);
    return 0;
}
