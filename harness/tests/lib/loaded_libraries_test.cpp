// The libraries a run's cases loaded: their union, the warning where one differs from what the
// probe found installed, and the fleet report naming the node whose set differs from most.
#include "report/loaded_libraries.hpp"
#include "report/report.hpp"
#include "run/run_folder.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

namespace {
using namespace pitfall::runner;
using nlohmann::json;
namespace fs = std::filesystem;

json lib(const std::string& name, const std::string& version, const std::string& real) {
    return {{"name", name}, {"path", real}, {"real_path", real}, {"version", version}};
}

/// A case record; `libraries` an array (json::array: a braced single object is that object).
json record(const std::string& key, const json& libraries) {
    return {{"case", key}, {"result", {{"loaded_libraries", libraries}}}};
}

const json cudnn_9_19 = lib("libcudnn", "9.19.0", "/usr/lib/libcudnn.so.9.19.0");
const json cudnn_9_1 = lib("libcudnn", "9.1.0", "/venv/nvidia/cudnn/lib/libcudnn.so.9.1.0");
const json cudart = lib("libcudart", "13.0.96", "/usr/local/cuda/lib64/libcudart.so.13.0.96");

json fingerprint_with(const json& files) {
    return {{"libraries", {{"loaded_library_files", files}}}};
}

TEST(RunLibraries, UnionCountsEachCaseOnce) {
    const std::vector<json> cases = {record("cuda.a.x", {cudart, cudnn_9_19, cudart}),
                                     record("cuda.a.y", {cudart, cudnn_9_1}),
                                     record("cpu.a.x", json::array()),
                                     json("not a record"),
                                     record("cuda.b.x", json(7)),
                                     record("cuda.b.y", {{{"name", 3}}})};
    const auto uses = libraries_loaded(cases);
    ASSERT_EQ(uses.size(), 3u);
    EXPECT_EQ(uses[0].name, "libcudart");
    EXPECT_EQ(uses[0].cases, (std::vector<std::string>{"cuda.a.x", "cuda.a.y"}));
    EXPECT_EQ(uses[1].version, "9.1.0");
    EXPECT_EQ(uses[2].version, "9.19.0");
    const json j = libraries_json(uses);
    EXPECT_EQ(j[0]["cases"], 2);
    EXPECT_EQ(library_set(cases),
              (std::vector<std::string>{"libcudart 13.0.96", "libcudnn 9.1.0", "libcudnn 9.19.0"}));
}

TEST(RunLibraries, CaseLoadingAnotherCudnnThanTheDoctorFoundIsNamed) {
    const json fp = fingerprint_with({cudart, cudnn_9_19});
    const std::vector<json> cases = {record("cuda.a.x", {cudart, cudnn_9_19}),
                                     record("cuda.a.y", {cudart, cudnn_9_1}),
                                     record("cuda.a.z", json::array({cudnn_9_1}))};
    const auto found = library_mismatches(fp, cases);
    ASSERT_EQ(found.size(), 1u);
    EXPECT_EQ(found[0].text(), "case cuda.a.y (and 1 more) loaded libcudnn 9.1.0 from "
                               "/venv/nvidia/cudnn/lib/libcudnn.so.9.1.0; the doctor found "
                               "9.19.0 at /usr/lib/libcudnn.so.9.19.0");
    // The same version from another file is a mismatch too; a library the probe never loaded
    // (cuDNN's sub-libraries) and a fingerprint without the probe's list are not compared.
    const json copy = lib("libcudnn", "9.19.0", "/opt/other/libcudnn.so.9.19.0");
    EXPECT_EQ(library_mismatches(fp, {record("cuda.a.x", json::array({copy}))}).size(), 1u);
    EXPECT_TRUE(library_mismatches(
                    fp, {record("cuda.a.x", json::array({lib("libcudnn_ops", "9.1.0", "/x")}))})
                    .empty());
    EXPECT_TRUE(library_mismatches(json::object(), cases).empty());
    EXPECT_TRUE(library_mismatches(fp, {record("cuda.a.x", {cudart, cudnn_9_19})}).empty());
}

// ---- the fleet: two node folders on disk whose cases loaded different cuDNNs

class FleetLibraries : public ::testing::Test {
protected:
    void SetUp() override {
        std::string pattern = (fs::temp_directory_path() / "pitfall-libs-XXXXXX").string();
        ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
        m_tmp = pattern;
    }
    void TearDown() override {
        std::error_code ec;
        fs::remove_all(m_tmp, ec);
    }

    /// DIR/nodes/<name>/: node.json and run/ with one PASS case that loaded `libraries`.
    std::string node(const std::string& name, const json& libraries) {
        std::string dir = m_tmp + "/nodes/" + name;
        fs::create_directories(dir);
        auto created = run_folder::create(dir + "/run", false);
        EXPECT_TRUE(created.is_ok()) << created.error().message();
        run_folder folder = std::move(created).value();
        run_header h;
        h.at = "2026-11-28T06:00:00Z";
        h.fingerprint_id = "0123456789abcdef";
        h.fingerprint_summary = {{"device_name", "NVIDIA H100 80GB HBM3"}};
        h.profile = "any";
        h.selection.push_back(case_key::parse("cuda.s.a").value());
        EXPECT_TRUE(folder.append(h).is_ok());
        case_record r;
        r.key = case_key::parse("cuda.s.a").value();
        r.kind = "reproduce";
        r.verdict = verdict_kind::pass;
        r.reason = "as expected: ok";
        r.observed = {{"status", "ok"}};
        r.result = {{"loaded_libraries", libraries}};
        r.log = run_folder::log_name(r.key);
        EXPECT_TRUE(folder.append(r).is_ok());
        std::ofstream(dir + "/node.json")
            << json{{"schema", "pitfall.fleet-node/1"}, {"node", name}, {"outcome", "ran"}}.dump();
        return dir;
    }
    static std::vector<run_data> load(const std::vector<std::string>& dirs) {
        std::vector<run_data> out;
        for (const auto& d : dirs) {
            auto one = load_cell_or_run(d);
            EXPECT_TRUE(one.is_ok()) << one.error().message();
            if (one.is_ok())
                out.push_back(std::move(one).value());
        }
        return out;
    }
    std::string m_tmp;
};

TEST_F(FleetLibraries, TwoNodesThatDifferAreBothNamedWithoutAMajority) {
    const auto nodes =
        load({node("gpu1", json{cudart, cudnn_9_19}), node("gpu2", json{cudart, cudnn_9_1})});
    const auto o = fleet_library_outliers(nodes);
    EXPECT_FALSE(o.has_majority);
    ASSERT_EQ(o.nodes.size(), 2u);
    EXPECT_EQ(o.nodes[1].text(), "gpu2 loaded libcudart 13.0.96, libcudnn 9.1.0");
    const std::string md = render_fleet_markdown(nodes);
    EXPECT_NE(md.find("### Loaded libraries"), std::string::npos) << md;
    EXPECT_NE(md.find("No set of libraries is loaded by most nodes"), std::string::npos) << md;
}

TEST_F(FleetLibraries, TheNodeOutsideTheMajorityIsNamedInEveryFormat) {
    const auto nodes =
        load({node("gpu1", json{cudart, cudnn_9_19}), node("gpu2", json{cudart, cudnn_9_1}),
              node("gpu3", json{cudart, cudnn_9_19})});
    const auto o = fleet_library_outliers(nodes);
    ASSERT_TRUE(o.has_majority);
    ASSERT_EQ(o.nodes.size(), 1u);
    const std::string line = "gpu2 loaded libcudnn 9.1.0 where most nodes loaded libcudnn 9.19.0";
    EXPECT_EQ(o.nodes[0].text(), line);
    EXPECT_NE(render_fleet_markdown(nodes).find("- " + line), std::string::npos);
    EXPECT_NE(render_fleet_html(nodes).find(line), std::string::npos);
    const json j = render_fleet_json(nodes);
    ASSERT_EQ(j["loaded_libraries"]["nodes"].size(), 1u);
    EXPECT_EQ(j["loaded_libraries"]["nodes"][0]["node"], "gpu2");
    EXPECT_EQ(j["loaded_libraries"]["majority"], (json{"libcudart 13.0.96", "libcudnn 9.19.0"}));
}

TEST_F(FleetLibraries, NodesAlikeNameNone) {
    const auto nodes =
        load({node("gpu1", json::array({cudart})), node("gpu2", json::array({cudart}))});
    EXPECT_TRUE(fleet_library_outliers(nodes).nodes.empty());
    EXPECT_NE(render_fleet_markdown(nodes).find("Every node that ran loaded the same libraries."),
              std::string::npos);
}

// A run's own reports: the union and the warning, in JSON and Markdown.
TEST_F(FleetLibraries, RunReportsListTheLibrariesAndTheWarning) {
    const std::string dir = node("gpu1", json{cudart, cudnn_9_1});
    auto run = load_run(dir + "/run");
    ASSERT_TRUE(run.is_ok()) << run.error().message();
    run.value().header["fingerprint"] = fingerprint_with({cudart, cudnn_9_19});
    const json j = render_json(run.value());
    ASSERT_EQ(j["loaded_libraries"].size(), 2u);
    ASSERT_EQ(j["library_warnings"].size(), 1u);
    EXPECT_EQ(j["cases"][0]["loaded_libraries"].size(), 2u);
    const std::string md = render_markdown(run.value());
    EXPECT_NE(md.find("**warning**: case cuda.s.a loaded libcudnn 9.1.0"), std::string::npos) << md;
    const std::string html = render_html(run.value());
    EXPECT_NE(html.find("id=\"loaded-libraries\""), std::string::npos);
    EXPECT_NE(html.find("class=\"libraries\""), std::string::npos); // the case's own table
}

} // namespace
