// A fleet node folder's node.json (and, the same bytes, its doctor.json): load_cell_or_run (the
// report's merge input), then the fleet report of three such nodes, one of them made to differ,
// in HTML and Markdown.
#include "fuzz_common.hpp"
#include "report/report.hpp"
#include "run/run_folder.hpp"

#include <filesystem>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace pitfall;
    static const std::string dir = [] {
        // The node ran: a run folder of two cases on a GPU, made once.
        const std::string d = fuzz::scratch() + "/nodes/gpu1";
        auto folder = runner::run_folder::create(d + "/run", false);
        if (!folder.is_ok())
            std::abort();
        runner::run_header h;
        h.at = "2026-11-26T03:40:00Z";
        h.fingerprint_summary = {{"device_name", "NVIDIA H100 80GB HBM3"},
                                 {"cuda_driver_version", 13000},
                                 {"cuda_runtime_version", 13000},
                                 {"cudnn_version", 91002}};
        for (const char* key : {"cpu.fz.ok", "cuda.fz.ok"})
            h.selection.push_back(runner::case_key::parse(key).value());
        if (!folder.value().append(h).is_ok())
            std::abort();
        for (const auto& key : h.selection) {
            runner::case_record r;
            r.key = key;
            r.verdict = runner::verdict_kind::pass;
            r.observed = {{"status", "ok"}};
            if (!folder.value().append(r).is_ok())
                std::abort();
        }
        return d;
    }();
    fuzz::write_bytes(dir + "/node.json", data, size);
    fuzz::write_bytes(dir + "/doctor.json", data, size);
    auto node = runner::load_cell_or_run(dir);
    if (!node.is_ok())
        return 0;
    std::vector<runner::run_data> nodes{node.value(), node.value(), node.value()};
    if (!nodes[1].cases.empty())
        nodes[1].cases[0]["verdict"] = "FAIL";
    (void)runner::render_fleet_html(nodes);
    (void)runner::render_fleet_markdown(nodes);
    return 0;
}
