// The pure parts of `pitfall bundle`: which names are secrets, redaction of text, JSON and a
// chained results.jsonl (which `pitfall report` must still read), the kernel-log filter, and
// the bounds on external commands (real processes: yes, sleep, false).
#include "bundle/collect.hpp"
#include "bundle/redact.hpp"
#include "run/run_folder.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <unistd.h>

namespace {
using namespace pitfall::runner;
using nlohmann::json;
namespace fs = std::filesystem;

const std::string planted = "planted-secret-4711";

TEST(BundleRedaction, SecretNamesInAnyCase) {
    for (const char* name : {"MY_API_TOKEN", "aws_secret_access_key", "SshKeyPath", "DB_PASSWORD",
                             "GOOGLE_APPLICATION_CREDENTIALS", "token"})
        EXPECT_TRUE(is_secret_name(name)) << name;
    for (const char* name : {"PATH", "HOME", "CUDA_VISIBLE_DEVICES", "LD_LIBRARY_PATH", ""})
        EXPECT_FALSE(is_secret_name(name)) << name;
}

TEST(BundleRedaction, SecretValuesLongestFirstAndNeverTiny) {
    const auto values =
        secret_values({"MY_API_TOKEN=" + planted, "PATH=/usr/bin", "A_KEY=1",
                       "B_KEY=planted-secret", "NO_EQUALS_TOKEN", "C_SECRET=" + planted});
    EXPECT_EQ(values, (std::vector<std::string>{planted, "planted-secret"}));
}

TEST(BundleRedaction, TextIsScrubbedOfValuesAndAssignments) {
    const std::string binary = std::string("head\0", 5) + planted + std::string("\0tail", 5);
    const std::string scrubbed = scrub_text(binary, {planted});
    EXPECT_EQ(scrubbed.find(planted), std::string::npos);
    EXPECT_NE(scrubbed.find("[redacted]"), std::string::npos);
    EXPECT_EQ(scrub_text("env: OTHER_TOKEN=abc x=1 PATH=/bin", {}),
              "env: OTHER_TOKEN=[redacted] x=1 PATH=/bin");
    EXPECT_EQ(scrub_text("url?api_key=zz&b=2; KEY=", {}), "url?api_key=[redacted]&b=2; KEY=");
    EXPECT_EQ(scrub_text("a == b", {}), "a == b");
}

TEST(BundleRedaction, SecretValuesInEveryFormAFileHoldsThem) {
    const std::string value = "p&ss\"w<rd 1/2'x";
    const auto values = secret_values({"DB_PASSWORD=" + value});
    for (const std::string& form :
         {value, std::string("p&amp;ss&quot;w&lt;rd 1/2&#39;x"),
          std::string("p&amp;ss&quot;w&lt;rd 1/2&apos;x"), std::string("p&ss\\\"w<rd 1/2'x"),
          std::string("p%26ss%22w%3Crd%201%2F2%27x"), std::string("p%26ss%22w%3crd%201%2f2%27x")}) {
        EXPECT_NE(std::find(values.begin(), values.end(), form), values.end()) << form;
        const std::string scrubbed = scrub_text("<td>" + form + "</td>", values);
        EXPECT_EQ(scrubbed, "<td>[redacted]</td>") << form;
    }
}

TEST(BundleRedaction, SecretsOfKnownShapesWhateverNamesThem) {
    const std::pair<const char*, const char*> redacted[] = {
        {"pip from https://alice:hunter2@pypi.example.com/simple now",
         "pip from https://[redacted]@pypi.example.com/simple now"},
        {"postgres://svc:p%40ss@db:5432/x", "postgres://[redacted]@db:5432/x"},
        {"> Authorization: Bearer abc.def.ghi\nnext", "> Authorization: [redacted]\nnext"},
        {"proxy-authorization: Basic dXNlcjpwYXNz", "proxy-authorization: [redacted]"},
        {"Cookie: session=abc; id=2\r\n", "Cookie: [redacted]\r\n"},
        {"a\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaA\n-----END OPENSSH PRIVATE KEY-----\nz",
         "a\n[redacted]\nz"},
        {"-----BEGIN RSA PRIVATE KEY-----\nMIIE (cut short)", "[redacted]"},
        {"GITHUB_PAT=ghp_abcdefghijklmnopqrstuvwxyz0123456789", "GITHUB_PAT=[redacted]"},
        {"x github_pat_11ABCDEFG0123456789_abcdefghijkl y", "x [redacted] y"},
        {"glpat-abcdefghij0123456789", "[redacted]"},
        {"HF_AUTH=hf_abcdefghijklmnopqrstuvwxyz", "HF_AUTH=[redacted]"},
        {"id AKIAABCDEFGHIJKLMNOP.", "id [redacted]."},
        {"slack xoxb-1234567890-abcdef", "slack [redacted]"},
    };
    for (const auto& [text, expected] : redacted)
        EXPECT_EQ(scrub_text(text, {}), expected) << text;
    // Look-alikes that are no secret stay as they are.
    for (const char* kept : {"http://host/path@v2", "mail alice@example.com", "ghp_short",
                             "myghp_abcdefghijklmnopqrstuvwxyz", "AKIA-not-a-key",
                             "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----",
                             "authorization header missing", "a://@host"})
        EXPECT_EQ(scrub_text(kept, {}), kept) << kept;
}

TEST(BundleRedaction, ManyHitsAreAllReplaced) {
    std::string text;
    for (int i = 0; i < 20000; ++i)
        text += planted + " ghp_abcdefghijklmnopqrstuvwxyz0123 ";
    const std::string scrubbed = scrub_text(text, {planted});
    EXPECT_EQ(scrubbed.find(planted), std::string::npos);
    EXPECT_EQ(scrubbed.find("ghp_"), std::string::npos);
    std::size_t hits = 0;
    for (std::size_t at = scrubbed.find("[redacted]"); at != std::string::npos;
         at = scrubbed.find("[redacted]", at + 1))
        ++hits;
    EXPECT_EQ(hits, 40000u);
}

TEST(BundleRedaction, JsonEnvironmentsAndVariableNamesOnly) {
    const json doc = {{"environment", {{"my_token", "short"}, {"PATH", "/bin"}}},
                      {"MY_API_KEY", 42},
                      {"token", "ec49ee5975586e9"}, // a record's own field: data
                      {"argv", {"pitfall", "--note", "value " + planted}},
                      {"nested", {{"list", {{{"OTHER_SECRET", "x"}}}}}}};
    const json r = redact_json(doc, {planted});
    EXPECT_EQ(r["environment"]["my_token"], "[redacted]");
    EXPECT_EQ(r["environment"]["PATH"], "/bin");
    EXPECT_EQ(r["MY_API_KEY"], "[redacted]");
    EXPECT_EQ(r["token"], "ec49ee5975586e9");
    EXPECT_EQ(r["argv"][2], "value [redacted]");
    EXPECT_EQ(r["nested"]["list"][0]["OTHER_SECRET"], "[redacted]");
}

/// A chained results.jsonl whose header records a secret in its fingerprint's environment:
/// the redacted copy holds no secret and still reads as a run (its chain named again).
TEST(BundleRedaction, ResultsChainStillReadsAfterRedaction) {
    const fs::path tmp =
        fs::temp_directory_path() / ("pitfall-redact-" + std::to_string(::getpid()));
    fs::remove_all(tmp);
    {
        auto folder = run_folder::create((tmp / "run").string(), false);
        ASSERT_TRUE(folder.is_ok()) << folder.error().message();
        run_header h;
        h.at = "2026-11-28T06:00:00Z";
        h.fingerprint = {{"environment", {{"MY_API_TOKEN", planted}}}};
        h.selection.push_back(case_key::parse("cpu.s.a").value());
        ASSERT_TRUE(folder.value().append(h).is_ok());
        case_record r;
        r.key = case_key::parse("cpu.s.a").value();
        r.kind = "reproduce";
        r.observed = {{"status", "ok"}};
        r.output_tail = "printed MY_API_TOKEN=" + planted;
        r.log = run_folder::log_name(r.key);
        ASSERT_TRUE(folder.value().append(r).is_ok());
    }
    std::ifstream in(tmp / "run" / "results.jsonl", std::ios::binary);
    std::stringstream original;
    original << in.rdbuf();
    const std::string redacted = redact_results_lines(original.str(), {planted});
    EXPECT_EQ(redacted.find(planted), std::string::npos);
    const auto reads = [&](const std::string& text) {
        fs::create_directories(tmp / "copy");
        std::ofstream(tmp / "copy" / "results.jsonl", std::ios::binary | std::ios::trunc) << text;
        auto copy = run_folder::open((tmp / "copy").string());
        return copy.is_ok() && copy.value().read().is_ok();
    };
    EXPECT_TRUE(reads(redacted));
    // The same replacement without naming the chain again: refused, as a forged line is.
    std::string naive = original.str();
    for (std::size_t at = naive.find(planted); at != std::string::npos; at = naive.find(planted))
        naive.replace(at, planted.size(), "[redacted]");
    EXPECT_FALSE(reads(naive));
    fs::remove_all(tmp);
}

TEST(BundleCollect, KernelLinesOfNvidiaOnlyTheLastOnes) {
    const std::string log = "[ 1.0] usb 1-1: new device\n"
                            "[ 2.0] NVRM: loading NVIDIA UNIX x86_64 Kernel Module 580.65.06\n"
                            "[ 3.0] nvidia-uvm: Loaded the UVM driver\n"
                            "[ 4.0] NVRM: Xid (PCI:0000:17:00): 79, GPU has fallen off the bus.\n"
                            "[ 5.0] eth0: link up\n";
    EXPECT_EQ(nvidia_kernel_lines(log, 10), "[ 2.0] NVRM: loading NVIDIA UNIX x86_64 Kernel Module "
                                            "580.65.06\n[ 3.0] nvidia-uvm: Loaded the UVM driver\n"
                                            "[ 4.0] NVRM: Xid (PCI:0000:17:00): 79, GPU has fallen "
                                            "off the bus.\n");
    EXPECT_EQ(nvidia_kernel_lines(log, 1),
              "[ 4.0] NVRM: Xid (PCI:0000:17:00): 79, GPU has fallen off the bus.\n");
}

class BundleCommands : public ::testing::Test {
protected:
    void SetUp() override {
        std::string pattern = (fs::temp_directory_path() / "pitfall-cmd-XXXXXX").string();
        ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
        m_tmp = pattern;
    }
    void TearDown() override { fs::remove_all(m_tmp); }
    std::string m_tmp;
};

TEST_F(BundleCommands, OutputIsCutAtTheCap) {
    const std::string yes = find_program("yes");
    ASSERT_FALSE(yes.empty());
    const bundle_item item = run_bounded({yes}, m_tmp + "/out", 10, 4096);
    EXPECT_EQ(item.state, "truncated") << item.why;
    EXPECT_EQ(item.bytes, 4096u);
    EXPECT_EQ(fs::file_size(m_tmp + "/out"), 4096u);
}

TEST_F(BundleCommands, ACommandPastItsTimeIsEnded) {
    const std::string sleep = find_program("sleep");
    ASSERT_FALSE(sleep.empty());
    const auto started = std::chrono::steady_clock::now();
    const bundle_item item = run_bounded({sleep, "30"}, m_tmp + "/out", 0.3, 4096);
    const double took =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    EXPECT_EQ(item.state, "truncated");
    EXPECT_NE(item.why.find("ended after 0.3 s"), std::string::npos) << item.why;
    EXPECT_LT(took, 5.0);
}

TEST_F(BundleCommands, FailuresSayWhy) {
    const bundle_item failed = run_bounded({find_program("false")}, m_tmp + "/out", 5, 4096);
    EXPECT_EQ(failed.state, "failed");
    EXPECT_NE(failed.why.find("exited 1"), std::string::npos) << failed.why;
    const bundle_item absent = run_bounded({m_tmp + "/no-such-program"}, m_tmp + "/out", 5, 4096);
    EXPECT_EQ(absent.state, "failed");
    EXPECT_TRUE(find_program("no-such-program-anywhere").empty());
}

} // namespace
