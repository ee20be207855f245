// The scenarios' compute on the CPU backend against the raw OpenBLAS calls it wraps.
//
//   gemm:  cpu_backend::gemm (status, tracker-free call-through) vs cblas_?gemm, at the shapes
//          of float64_inputs' big GEMM (dW1 = dZ1 X^T: hidden x features x batch).
//   step:  one float64_inputs training step (4 GEMMs + 6 elementwise functors + Adam through the
//          SDK) vs the same 4 GEMMs called raw: the ratio is what the SDK and the elementwise
//          work add on top of BLAS.
// After the runs it prints each ratio measured in this run (medians of the repetitions).
#include "pitfall/models/dense.hpp"

#include <benchmark/benchmark.h>
#include <cblas.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

namespace {
using namespace pitfall;
using pitfall::dense::dense_model;
using pitfall::dense::model_shape;

constexpr int features = 256;
constexpr int hidden = 10;
constexpr int batch = 256;

template <class T> std::vector<T> filled(std::size_t n, T value) {
    return std::vector<T>(n, value);
}

inline void raw_gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k, const float* a,
                     int lda, const float* b, int ldb, float* c, int ldc) {
    cblas_sgemm(CblasColMajor, ta, tb, m, n, k, 1.f, a, lda, b, ldb, 0.f, c, ldc);
}
inline void raw_gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k, const double* a,
                     int lda, const double* b, int ldb, double* c, int ldc) {
    cblas_dgemm(CblasColMajor, ta, tb, m, n, k, 1.0, a, lda, b, ldb, 0.0, c, ldc);
}

template <class T> void BM_gemm_raw(benchmark::State& state) {
    auto a = filled<T>(hidden * batch, T(0.5)), b = filled<T>(features * batch, T(0.25));
    auto c = filled<T>(hidden * features, T(0));
    for (auto _ : state) {
        raw_gemm(CblasNoTrans, CblasTrans, hidden, features, batch, a.data(), hidden, b.data(),
                 features, c.data(), hidden);
        benchmark::DoNotOptimize(c.data());
    }
}

template <class T> void BM_gemm_sdk(benchmark::State& state) {
    auto a = filled<T>(hidden * batch, T(0.5)), b = filled<T>(features * batch, T(0.25));
    auto c = filled<T>(hidden * features, T(0));
    for (auto _ : state) {
        const status s =
            cpu_backend::gemm(transpose::no, transpose::yes, hidden, features, batch, T(1),
                              a.data(), hidden, b.data(), features, T(0), c.data(), hidden);
        benchmark::DoNotOptimize(s);
        benchmark::DoNotOptimize(c.data());
    }
}

template <class T> void BM_step_raw_gemms(benchmark::State& state) {
    auto x = filled<T>(features * batch, T(0.01)), w1 = filled<T>(hidden * features, T(0.02));
    auto a1 = filled<T>(hidden * batch, T(0)), w2 = filled<T>(hidden, T(0.1)),
         z2 = filled<T>(batch, T(0));
    auto dz2 = filled<T>(batch, T(0.001)), dw2 = filled<T>(hidden, T(0)),
         dz1 = filled<T>(hidden * batch, T(0.001));
    auto dw1 = filled<T>(hidden * features, T(0));
    for (auto _ : state) {
        raw_gemm(CblasNoTrans, CblasNoTrans, hidden, batch, features, w1.data(), hidden, x.data(),
                 features, a1.data(), hidden);
        raw_gemm(CblasNoTrans, CblasNoTrans, 1, batch, hidden, w2.data(), 1, a1.data(), hidden,
                 z2.data(), 1);
        raw_gemm(CblasNoTrans, CblasTrans, 1, hidden, batch, dz2.data(), 1, a1.data(), hidden,
                 dw2.data(), 1);
        raw_gemm(CblasNoTrans, CblasTrans, hidden, features, batch, dz1.data(), hidden, x.data(),
                 features, dw1.data(), hidden);
        benchmark::DoNotOptimize(dw1.data());
    }
}

template <class T> void BM_step_sdk(benchmark::State& state) {
    const model_shape shape{features, hidden};
    const auto data = dense::make_dataset(batch, features, 7);
    std::vector<T> h_x(data.x.begin(), data.x.end()), h_y(data.y.begin(), data.y.end());
    auto model = dense_model<cpu_backend, T>::create(shape, batch, dense::adam_config{},
                                                     dense::initial_parameters(shape, 7));
    if (!model.is_ok()) {
        state.SkipWithError(model.error().describe().c_str());
        return;
    }
    for (auto _ : state) {
        const status s = model->train_step(h_x.data(), h_y.data(), batch);
        if (!s.is_ok()) {
            state.SkipWithError(s.describe().c_str());
            break;
        }
    }
}

BENCHMARK(BM_gemm_raw<float>);
BENCHMARK(BM_gemm_sdk<float>);
BENCHMARK(BM_gemm_raw<double>);
BENCHMARK(BM_gemm_sdk<double>);
BENCHMARK(BM_step_raw_gemms<float>);
BENCHMARK(BM_step_sdk<float>);
BENCHMARK(BM_step_raw_gemms<double>);
BENCHMARK(BM_step_sdk<double>);

// Keeps each benchmark's real time per iteration (the median when repetitions are asked for).
class ratio_reporter : public benchmark::ConsoleReporter {
public:
    void ReportRuns(const std::vector<Run>& runs) override {
        for (const auto& run : runs) {
            const std::string name = run.benchmark_name();
            if (run.run_type == Run::RT_Aggregate && run.aggregate_name != "median")
                continue;
            std::string base = name.substr(0, name.find("_median"));
            m_times[base] = run.GetAdjustedRealTime();
        }
        ConsoleReporter::ReportRuns(runs);
    }
    void print_ratios() const {
        std::printf("\nframework overhead, measured in this run (SDK time / raw OpenBLAS time):\n");
        for (const char* type : {"float", "double"}) {
            for (const auto& [sdk, raw] :
                 {std::pair<std::string, std::string>{"BM_gemm_sdk", "BM_gemm_raw"},
                  {"BM_step_sdk", "BM_step_raw_gemms"}}) {
                const auto a = m_times.find(sdk + "<" + type + ">");
                const auto b = m_times.find(raw + "<" + type + ">");
                if (a != m_times.end() && b != m_times.end() && b->second > 0)
                    std::printf("  %-7s %-34s %.3f\n", type, (sdk + " / " + raw).c_str(),
                                a->second / b->second);
            }
        }
    }

private:
    std::map<std::string, double> m_times;
};
} // namespace

int main(int argc, char** argv) {
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv))
        return 1;
    ratio_reporter reporter;
    benchmark::RunSpecifiedBenchmarks(&reporter);
    reporter.print_ratios();
    benchmark::Shutdown();
    return 0;
}
