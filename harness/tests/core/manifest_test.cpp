#include "pitfall/detail/manifest.hpp"

#include <gtest/gtest.h>

namespace {
using namespace pitfall;

const char* good = R"({
  "name": "demo", "summary": "s", "failure_class": "dtype", "backends": ["cpu", "cuda"],
  "timeout_seconds": 30, "params": {"rows": {"default": 100, "doc": "rows"}},
  "variants": [{"name": "reproduce", "kind": "reproduce"},
               {"name": "remedy", "kind": "remedy", "backends": ["cpu"], "needs_device": false}],
  "ratios": [{"name": "r", "numerator": "reproduce", "denominator": "remedy", "samples": "s"}]
})";

TEST(Manifest, ParsesAGoodOne) {
    auto m = parse_manifest(good, "demo.json");
    ASSERT_TRUE(m.is_ok()) << m.error().message();
    EXPECT_EQ(m->name, "demo");
    EXPECT_EQ(m->timeout_seconds, 30);
    ASSERT_EQ(m->variants.size(), 2u);
    EXPECT_EQ(m->backends_of(m->variants[0]), (std::vector<std::string>{"cpu", "cuda"}));
    EXPECT_EQ(m->backends_of(m->variants[1]), (std::vector<std::string>{"cpu"}));
    EXPECT_FALSE(m->variants[1].needs_device);
    EXPECT_EQ(m->find_param("rows")->default_value, 100);
}

std::string error_of(const std::string& text) {
    auto m = parse_manifest(text, "f.json");
    return m.is_ok() ? "" : m.error().message();
}

TEST(Manifest, ErrorsNameTheFileAndField) {
    std::string text = good;
    EXPECT_EQ(error_of(R"({"name": 3})"), "f.json: field 'name': expected a string, got number");
    EXPECT_NE(error_of(std::string(good).replace(text.find("\"dtype\""), 7, "7"))
                  .find("field 'failure_class'"),
              std::string::npos);
    EXPECT_NE(error_of(std::string(good).replace(text.find("\"cuda\"]"), 6, "\"rocm\""))
                  .find("unknown backend 'rocm'"),
              std::string::npos);
    EXPECT_NE(
        error_of(std::string(good).replace(text.find("\"remedy\", \"backends\""), 8, "\"cure\""))
            .find("variants[1].kind"),
        std::string::npos);
    EXPECT_NE(
        error_of(std::string(good).replace(text.find("\"timeout_seconds\""), 17, "\"timeout\""))
            .find("field 'timeout': unknown field"),
        std::string::npos);
    EXPECT_NE(error_of(std::string(good).replace(text.find("\"denominator\": \"remedy\""), 23,
                                                 "\"denominator\": \"nope\""))
                  .find("names unknown variant 'nope'"),
              std::string::npos);
}

TEST(Manifest, MalformedJsonGivesLineAndColumn) {
    const std::string msg = error_of("{\n  \"name\": \"x\",\n  oops\n}");
    EXPECT_NE(msg.find("f.json: malformed JSON at line 3, column 3"), std::string::npos) << msg;
}

TEST(Manifest, DuplicateVariantsAndBuiltInParamsAreRejected) {
    EXPECT_NE(error_of(R"({"name":"d","summary":"s","failure_class":"c","backends":["cpu"],
        "variants":[{"name":"a","kind":"probe"},{"name":"a","kind":"probe"}]})")
                  .find("duplicate variant 'a'"),
              std::string::npos);
    EXPECT_NE(error_of(R"({"name":"d","summary":"s","failure_class":"c","backends":["cpu"],
        "params":{"samples":{"default":3}}, "variants":[{"name":"a","kind":"probe"}]})")
                  .find("built in"),
              std::string::npos);
}

std::string with_param(const std::string& spec) {
    return R"({"name":"d","summary":"s","failure_class":"c","backends":["cpu"],
        "params":{"n":)" +
           spec + R"(}, "variants":[{"name":"a","kind":"probe"}]})";
}

TEST(Manifest, ParameterBoundsAndChoices) {
    auto m = parse_manifest(with_param(R"({"default": 8, "min": 1, "max": 64})"), "f.json");
    ASSERT_TRUE(m.is_ok()) << m.error().message();
    const param_spec& n = *m->find_param("n");
    EXPECT_TRUE(check_param_value(n, 1).is_ok());
    EXPECT_TRUE(check_param_value(n, 64).is_ok());
    EXPECT_EQ(check_param_value(n, 0).message(), "must be >= 1, got 0");
    EXPECT_EQ(check_param_value(n, 65).name(), "bad_parameter");
    auto c =
        parse_manifest(with_param(R"({"default": "fp16", "choices": ["fp16", "bf16"]})"), "f.json");
    ASSERT_TRUE(c.is_ok()) << c.error().message();
    EXPECT_EQ(check_param_value(*c->find_param("n"), "fp8").message(),
              "must be one of fp16, bf16, got fp8");
}

TEST(Manifest, BadBoundsNameTheField) {
    EXPECT_NE(
        error_of(with_param(R"({"default": 0, "min": 1})")).find("params.n.default': must be >= 1"),
        std::string::npos);
    EXPECT_NE(error_of(with_param(R"({"default": 2, "min": 0.5})")).find("params.n.min"),
              std::string::npos); // an integer parameter takes integer bounds
    EXPECT_NE(error_of(with_param(R"({"default": "x", "max": 3})")).find("no bounds"),
              std::string::npos);
    EXPECT_NE(error_of(with_param(R"({"default": 2, "choices": []})")).find("params.n.choices"),
              std::string::npos);
    EXPECT_NE(error_of(with_param(R"({"default": 2, "choices": [1, "b"]})")).find("choices[1]"),
              std::string::npos);
    EXPECT_NE(
        error_of(with_param(R"({"default": 2, "step": 1})")).find("params.n.step': unknown field"),
        std::string::npos);
    EXPECT_NE(error_of(with_param(R"({"default": 1e999})")).find("f.json: "), std::string::npos);
}

// A scenario with an integer n in [1, 64], a number lr and a string dtype, whose one variant
// carries `variant_fields` (the parameter set under test).
std::string with_variant(const std::string& variant_fields) {
    return R"({"name":"d","summary":"s","failure_class":"c","backends":["cpu"],
        "params":{"n":{"default":8,"min":1,"max":64},"lr":{"default":0.5,"min":0.0,"max":1.0},
                  "dtype":{"default":"fp16","choices":["fp16","bf16"]}},
        "variants":[{"name":"a","kind":"probe")" +
           variant_fields + R"(}]})";
}

TEST(Manifest, VariantParameterSets) {
    auto m = parse_manifest(
        with_variant(R"(,"param_set":"big_n","params":{"n":64,"lr":1,"dtype":"bf16"})"), "f.json");
    ASSERT_TRUE(m.is_ok()) << m.error().message();
    const variant_spec& a = m->variants[0];
    EXPECT_EQ(a.param_set, "big_n");
    EXPECT_EQ(a.params, (nlohmann::json{{"n", 64}, {"lr", 1}, {"dtype", "bf16"}}));
    auto plain = parse_manifest(with_variant(""), "f.json");
    ASSERT_TRUE(plain.is_ok()) << plain.error().message();
    EXPECT_TRUE(plain->variants[0].params.empty());
    EXPECT_EQ(plain->variants[0].param_set, "");
}

TEST(Manifest, BadVariantParameterSetsNameTheField) {
    const auto error = [](const std::string& fields) { return error_of(with_variant(fields)); };
    EXPECT_EQ(error(R"(,"params":{"m":3})"),
              "f.json: field 'variants[0].params.m': 'm' is not a parameter of this scenario "
              "(see 'params'; samples and warmup are set per run)");
    EXPECT_NE(error(R"(,"params":{"samples":3})").find("'variants[0].params.samples'"),
              std::string::npos);
    EXPECT_EQ(error(R"(,"params":{"n":65})"),
              "f.json: field 'variants[0].params.n': must be <= 64, got 65");
    EXPECT_EQ(error(R"(,"params":{"n":0})"),
              "f.json: field 'variants[0].params.n': must be >= 1, got 0");
    EXPECT_EQ(error(R"(,"params":{"n":2.5})"),
              "f.json: field 'variants[0].params.n': expected an integer, the type of "
              "params.n.default");
    EXPECT_NE(error(R"(,"params":{"n":"8"})").find("'variants[0].params.n': expected an integer"),
              std::string::npos);
    EXPECT_NE(
        error(R"(,"params":{"lr":"fast"})").find("'variants[0].params.lr': expected a number"),
        std::string::npos);
    EXPECT_NE(
        error(R"(,"params":{"dtype":"fp8"})").find("'variants[0].params.dtype': must be one of"),
        std::string::npos);
    EXPECT_NE(
        error(R"(,"params":{"dtype":16})").find("'variants[0].params.dtype': expected a string"),
        std::string::npos);
    EXPECT_NE(error(R"(,"params":[1])").find("'variants[0].params': expected a non-empty object"),
              std::string::npos);
    EXPECT_NE(error(R"(,"params":{})").find("'variants[0].params'"), std::string::npos);
    EXPECT_NE(error(R"(,"param_set":"big")")
                  .find("'variants[0].param_set': names a parameter set, "
                        "but the variant has no 'params'"),
              std::string::npos);
    EXPECT_NE(error(R"(,"param_set":"Big N","params":{"n":2})")
                  .find("'variants[0].param_set': 'Big N' must match"),
              std::string::npos);
    EXPECT_NE(error(R"(,"param_set":7,"params":{"n":2})").find("'variants[0].param_set'"),
              std::string::npos);
}
} // namespace

TEST(Manifest, VariantMemoryPerNamesAMeasurement) {
    auto m = parse_manifest(with_variant(R"(,"memory_per":"budget_bytes")"), "f.json");
    ASSERT_TRUE(m.is_ok()) << m.error().message();
    EXPECT_EQ(m->variants[0].memory_per, "budget_bytes");
    auto plain = parse_manifest(with_variant(""), "f.json");
    ASSERT_TRUE(plain.is_ok()) << plain.error().message();
    EXPECT_EQ(plain->variants[0].memory_per, "") << "exact bytes unless a variant says per what";
    for (const char* bad : {R"("")", R"("Budget bytes")", "7", "[]", "null"})
        EXPECT_NE(error_of(with_variant(std::string(R"(,"memory_per":)") + bad))
                      .find("'variants[0].memory_per'"),
                  std::string::npos)
            << bad;
}

TEST(Manifest, VariantThreadsSayWhy) {
    auto m = parse_manifest(with_variant(R"(,"threads":{"count":2,"why":"a producer thread"})"),
                            "f.json");
    ASSERT_TRUE(m.is_ok()) << m.error().message();
    EXPECT_EQ(m->variants[0].threads, 2);
    EXPECT_EQ(m->variants[0].threads_why, "a producer thread");
    auto plain = parse_manifest(with_variant(""), "f.json");
    ASSERT_TRUE(plain.is_ok()) << plain.error().message();
    EXPECT_EQ(plain->variants[0].threads, 1) << "one thread unless a variant says why more";

    const auto error = [](const std::string& fields) { return error_of(with_variant(fields)); };
    EXPECT_EQ(error(R"(,"threads":{"count":2})"),
              "f.json: field 'variants[0].threads.why': missing (a string is required)");
    EXPECT_EQ(error(R"(,"threads":{"count":2,"why":""})"),
              "f.json: field 'variants[0].threads.why': say why the case needs more than the "
              "default one thread");
    for (const char* bad : {"0", "257", "1.5", "\"2\"", "-1", "18446744073709551617"})
        EXPECT_NE(error(std::string(R"(,"threads":{"why":"w","count":)") + bad + "}")
                      .find("'variants[0].threads.count': expected a whole number of threads"),
                  std::string::npos)
            << bad;
    EXPECT_NE(error(R"(,"threads":2)").find("'variants[0].threads': expected an object"),
              std::string::npos);
    EXPECT_NE(error(R"(,"threads":{"count":2,"why":"w","cores":2})")
                  .find("'variants[0].threads.cores': unknown field"),
              std::string::npos);
}

TEST(Manifest, APredictionSaysWhyPerBackend) {
    const auto doc = [](const std::string& kind, const std::string& fields) {
        return R"({"name":"d","summary":"s","failure_class":"c","backends":["cpu","cuda"],
            "variants":[{"name":"a","kind":")" +
               kind + "\"" + fields + "}]}";
    };
    auto m =
        parse_manifest(doc("reproduce", R"(,"prediction":{"cuda":"a table applied"})"), "f.json");
    ASSERT_TRUE(m.is_ok()) << m.error().message();
    EXPECT_EQ(m->variants[0].prediction.at("cuda"), "a table applied");
    EXPECT_EQ(m->variants[0].prediction.count("cpu"), 0U) << "a reproduction on the CPU";
    auto plain = parse_manifest(doc("reproduce", ""), "f.json");
    ASSERT_TRUE(plain.is_ok()) << plain.error().message();
    EXPECT_TRUE(plain->variants[0].prediction.empty());

    const auto error = [&](const std::string& kind, const std::string& fields) {
        return error_of(doc(kind, fields));
    };
    EXPECT_EQ(error("remedy", R"(,"prediction":{"cuda":"w"})"),
              "f.json: field 'variants[0].prediction': only a reproduce case predicts a failure");
    EXPECT_EQ(error("reproduce", R"(,"prediction":{"tpu":"w"})"),
              "f.json: field 'variants[0].prediction.tpu': not a backend this variant runs on");
    for (const char* bad : {R"({"cuda":""})", R"({"cuda":7})", R"({"cuda":null})"})
        EXPECT_NE(error("reproduce", std::string(R"(,"prediction":)") + bad)
                      .find("'variants[0].prediction.cuda': expected a non-empty string"),
                  std::string::npos)
            << bad;
    for (const char* bad : {"{}", "\"w\"", "[]", "true"})
        EXPECT_NE(error("reproduce", std::string(R"(,"prediction":)") + bad)
                      .find("'variants[0].prediction': expected an object"),
                  std::string::npos)
            << bad;
}

namespace {
std::string with_evidence(const std::string& list) {
    return R"({"name":"d","summary":"s","failure_class":"c","backends":["cpu"],
        "evidence":)" +
           list + R"(, "variants":[{"name":"a","kind":"probe"}]})";
}
} // namespace

TEST(Manifest, EvidenceNamesPublicThreads) {
    auto m = parse_manifest(
        with_evidence(R"([{"repo":"pytorch/pytorch","number":120901,"title":"t","shows":"s"}])"),
        "f.json");
    ASSERT_TRUE(m.is_ok()) << m.error().message();
    ASSERT_EQ(m->evidence.size(), 1u);
    EXPECT_EQ(m->evidence[0].repo, "pytorch/pytorch");
    EXPECT_EQ(m->evidence[0].number, 120901u);
    EXPECT_NE(error_of(with_evidence(R"({"repo":"a/b"})")).find("field 'evidence'"),
              std::string::npos);
    EXPECT_NE(error_of(with_evidence(R"([{"repo":"pytorch","number":1,"title":"t","shows":"s"}])"))
                  .find("'pytorch' is not owner/name"),
              std::string::npos);
    EXPECT_NE(error_of(with_evidence(R"([{"repo":"a/b","number":-3,"title":"t","shows":"s"}])"))
                  .find("evidence[0].number"),
              std::string::npos);
    EXPECT_NE(error_of(with_evidence(R"([{"repo":"a/b","number":2,"title":"","shows":"s"}])"))
                  .find("evidence[0].title': must not be empty"),
              std::string::npos);
    EXPECT_NE(
        error_of(with_evidence(R"([{"repo":"a/b","number":2,"title":"t","shows":"s","url":1}])"))
            .find("evidence[0].url': unknown field"),
        std::string::npos);
    EXPECT_NE(error_of(with_evidence(R"([{"repo":"a/b","number":2,"title":"t","shows":"s"},
                                         {"repo":"a/b","number":2,"title":"t","shows":"s"}])"))
                  .find("listed twice"),
              std::string::npos);
    // What gates a thread: its shape here, its names against expected/ by ci/evidence.py.
    EXPECT_TRUE(parse_manifest(with_evidence(R"([{"repo":"a/b","number":2,"title":"t","shows":"s",
        "seen_on":"cpu","gated_by":[{"variant":"a","check":"c"}]}])"),
                               "f.json")
                    .is_ok());
    EXPECT_NE(error_of(with_evidence(R"([{"repo":"a/b","number":2,"title":"t","shows":"s",
                                          "gated_by":[]}])"))
                  .find("evidence[0].gated_by': expected a non-empty array"),
              std::string::npos);
    EXPECT_NE(error_of(with_evidence(R"([{"repo":"a/b","number":2,"title":"t","shows":"s",
                                          "seen_on":"rocm","gated_by":[{}]}])"))
                  .find("evidence[0].seen_on': expected \"cuda\" or \"cpu\""),
              std::string::npos);
}

namespace {
std::string with_device_images(const std::string& list) {
    return R"({"name":"d","summary":"s","failure_class":"c","backends":["cpu"],
        "device_images":)" +
           list + R"(, "variants":[{"name":"a","kind":"probe"}]})";
}

TEST(Manifest, DeviceImagesAreCheckedBeforeCMakeBuildsThem) {
    EXPECT_TRUE(
        parse_manifest(with_device_images(R"([{"name":"old","source":"k.cu","format":"fatbin",
                                                    "nvcc_flags":["-gencode=arch=compute_75,code=sm_75"]}])"),
                       "f.json")
            .is_ok());
    EXPECT_NE(error_of(with_device_images(R"({"name":"old"})")).find("field 'device_images'"),
              std::string::npos);
    EXPECT_NE(error_of(with_device_images(
                           R"([{"name":"old","source":"k.cu","format":"elf","nvcc_flags":[]}])"))
                  .find("device_images[0].format': 'elf' is not fatbin, cubin or ptx"),
              std::string::npos);
    EXPECT_NE(error_of(with_device_images(
                           R"([{"name":"Old","source":"k.cu","format":"ptx","nvcc_flags":[]}])"))
                  .find("device_images[0].name'"),
              std::string::npos);
    EXPECT_NE(
        error_of(with_device_images(
                     R"([{"name":"old","source":"k.cu","format":"ptx","nvcc_flags":"-arch"}])"))
            .find("device_images[0].nvcc_flags': expected an array of strings"),
        std::string::npos);
}
// "timings": each series names the calibration control that bounds it per backend, and why;
// a variant may say otherwise for its own series.
TEST(Manifest, TimedSeriesNameTheControlThatBoundsThemPerBackend) {
    const std::string base = R"({"name": "demo", "summary": "s", "failure_class": "dtype",
        "backends": ["cpu", "cuda"],
        "timings": {"step_seconds": {"bound_by": {"cpu": "host_blas", "cuda": "gpu_launch"},
                                     "why": "small GEMMs; launch-bound on the GPU"}},
        "variants": [{"name": "reproduce", "kind": "reproduce"},
                     {"name": "remedy", "kind": "remedy",
                      "timings": {"step_seconds": {"bound_by": {"cuda": "gpu_fma"},
                                                   "why": "one large GEMM"}}}]})";
    auto m = parse_manifest(base, "demo.json");
    ASSERT_TRUE(m.is_ok()) << m.error().message();
    const variant_spec& reproduce = m->variants[0];
    const variant_spec& remedy = m->variants[1];
    EXPECT_EQ(m->bound_by(reproduce, "cpu", "step_seconds"), "host_blas");
    EXPECT_EQ(m->bound_by(reproduce, "cuda", "step_seconds"), "gpu_launch");
    EXPECT_EQ(m->bound_by(remedy, "cuda", "step_seconds"), "gpu_fma");
    EXPECT_EQ(m->bound_by(remedy, "cpu", "step_seconds"), ""); // the variant's entry decides
    EXPECT_EQ(m->bound_by(reproduce, "cpu", "other"), "");
    EXPECT_EQ(m->controls_of(reproduce, "cpu"), (std::vector<std::string>{"host_blas"}));
    EXPECT_EQ(m->controls_of(remedy, "cuda"), (std::vector<std::string>{"gpu_fma"}));

    const auto with = [](const std::string& timings) {
        return std::string(R"({"name": "demo", "summary": "s", "failure_class": "dtype",
            "backends": ["cpu"], "timings": )") +
               timings + R"(, "variants": [{"name": "reproduce", "kind": "reproduce"}]})";
    };
    EXPECT_NE(error_of(with(R"({"s": {"bound_by": {"cpu": "host_magic"}, "why": "w"}})"))
                  .find("timings.s.bound_by.cpu': expected a control: host_scalar"),
              std::string::npos);
    EXPECT_NE(error_of(with(R"({"s": {"bound_by": {"cpu": "gpu_fma"}, "why": "w"}})"))
                  .find("gpu_fma is a GPU control: cuda only"),
              std::string::npos);
    EXPECT_NE(error_of(with(R"({"s": {"bound_by": {"cuda": "gpu_fma"}, "why": "w"}})"))
                  .find("'cuda' is not among the backends"),
              std::string::npos);
    EXPECT_NE(error_of(with(R"({"s": {"bound_by": {"cpu": "host_blas"}}})")).find("timings.s.why"),
              std::string::npos);
    EXPECT_NE(
        error_of(with(R"({"s": {"bound_by": {"cpu": "host_blas"}, "why": ""}})")).find("say why"),
        std::string::npos);
    EXPECT_NE(error_of(with(R"({"s": {"bound_by": {}, "why": "w"}})")).find("timings.s.bound_by"),
              std::string::npos);
    EXPECT_NE(
        error_of(with(R"({"s": {"bound_by": {"cpu": 3}, "why": "w"}})")).find("expected a control"),
        std::string::npos);
    EXPECT_NE(error_of(with(R"({"s": {"bound_by": {"cpu": "host_blas"}, "why": "w", "x": 1}})"))
                  .find("unknown field (bound_by, why)"),
              std::string::npos);
    EXPECT_NE(error_of(with(R"(["s"])")).find("field 'timings'"), std::string::npos);
}
} // namespace

TEST(Manifest, NamesAreBoundedSoThatEveryCaseFileNameFits) {
    const std::string scenario = "s" + std::string(63, 'x');
    const std::string variant = "v" + std::string(99, 'x');
    const auto with = [](const std::string& s, const std::string& v) {
        return R"({"name":")" + s + R"(","summary":"s","failure_class":"c","backends":["cpu"],)" +
               R"("variants":[{"name":")" + v + R"(","kind":"probe"}]})";
    };
    EXPECT_TRUE(parse_manifest(with(scenario, variant), "f.json").is_ok());
    EXPECT_NE(error_of(with(scenario + "x", variant)).find("longer than 64 characters"),
              std::string::npos);
    EXPECT_NE(error_of(with(scenario, variant + "x")).find("variants[0].name': '"),
              std::string::npos);
}
