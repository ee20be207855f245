// A matrix cell's cell.json: load_cell_or_run (the report's merge input), then the matrix
// report of two such cells in HTML and Markdown.
#include "fuzz_common.hpp"
#include "report/report.hpp"

#include <filesystem>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace pitfall;
    static const std::string dir = [] {
        const std::string d = fuzz::scratch() + "/cell";
        std::filesystem::create_directories(d);
        return d;
    }();
    fuzz::write_bytes(dir + "/cell.json", data, size);
    auto cell = runner::load_cell_or_run(dir);
    if (!cell.is_ok())
        return 0;
    const std::vector<runner::run_data> runs{cell.value(), cell.value()};
    (void)runner::render_matrix_html(runs);
    (void)runner::render_matrix_markdown(runs);
    return 0;
}
