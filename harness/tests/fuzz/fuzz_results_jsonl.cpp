// A run folder's results.jsonl: read back (run_folder::read via load_run) and rendered as
// every report renders it (JSON, JUnit, Markdown, HTML).
#include "fuzz_common.hpp"
#include "report/report.hpp"
#include "run/run_folder.hpp"

#include <filesystem>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace pitfall;
    static const std::string dir = [] {
        const std::string d = fuzz::scratch() + "/run";
        std::filesystem::create_directories(d);
        return d;
    }();
    fuzz::write_bytes(dir + "/results.jsonl", data, size);
    auto run = runner::load_run(dir);
    if (!run.is_ok())
        return 0;
    (void)runner::render_json(run.value()).dump();
    (void)runner::render_junit(run.value());
    (void)runner::render_markdown(run.value());
    (void)runner::render_html(run.value());
    return 0;
}
