// fp16_softmax_masking: a masked attention softmax in fp16 turns rows into NaN.
//
// What
//   Attention scores of `rows` queries over `cols` keys go through a masked softmax, the way a
//   mixed-precision model runs it: scores stored in fp16, a mask constant added to the masked
//   keys ("inputs += (1 - mask) * -1e9"), the row maximum subtracted, exp, normalise. Some
//   rows are padding queries with every key masked; some hold an unscaled logit of 70000.
//     reproduce_mask_minus_1e9   the mask -1e9 added in fp16: every fully masked row is NaN.
//     reproduce_logit_overflow   a logit of 70000 stored in fp16: its row is NaN.
//     remedy_finite_mask         the mask added in fp32 and clamped at -65504 before the fp16
//                                store: no NaN, fully masked rows uniform as in float64.
//     remedy_fp32_softmax        the softmax in fp32 from fp32 logits, only the probabilities
//                                cast to fp16: no NaN, no inf, even with the 70000 logits.
//   Measured: nan_rows, inf_scores (infinities in the softmax input), max_abs_error of the
//   finite rows against an independent float64 softmax.
//
// Why it fails
//   fp16's largest finite value is 65504; float32 -> fp16 rounds everything from 65520 up to
//   inf (docs/cuda-rules.md#numbers). So -1e9 is -inf in fp16 and a masked score s + (-inf) is
//   -inf. For a row whose keys are all masked the maximum is -inf, and the softmax's own
//   stabilisation computes (-inf) - (-inf) = NaN (IEEE 754 7.2: inf - inf is invalid), so the
//   row, and everything that mixes it in later, is NaN. A logit of 70000 is +inf in fp16: the
//   row maximum is inf and inf - inf is NaN again. In float32 neither happens: -1e9 is finite
//   (the fully masked row comes out uniform, exp(0) for every key) and 70000 is far from
//   float32's 3.4e38. The CPU path of most code is float32, so it never meets this.
//
// Expected per backend
//   cpu   the fp16 arithmetic of the GPU done in software (the round-to-nearest-even converter
//         of scenarios/dtype_casting/soft_float.hpp; an fp16 addition is the fp32 sum of its
//         operands rounded to fp16, exactly what __hadd computes). Outcome ok; the checks say:
//         reproduce_mask_minus_1e9 nan_rows == the fully masked rows (64 of 512), inf_scores ==
//         the masked keys; reproduce_logit_overflow nan_rows == the overflow rows (32),
//         inf_scores == 32; the remedies 0 and 0, every row within 2^-11 of float64.
//   cuda  the same rows in a kernel with __half arithmetic (__float2half_rn, __hadd), one
//         thread per row: the same counts, judged by the same float64 reference (IEEE 754
//         semantics of __hadd and of float subtraction: CUDA Math API, "Half Arithmetic
//         Functions"; CUDA Programming Guide, "Floating-Point Standard"). No architecture or
//         version rule changes them (__hadd needs sm_53; every architecture built, 75 and up, has
//         it). Without a driver the case ends UNSUPPORTED (cudaErrorInsufficientDriver, 35) at
//         init.
//
// Remedy
//   Never let the mask or a score leave fp16's range: mask with the dtype's lowest finite
//   value (torch.finfo(torch.float16).min = -65504) and clamp s + mask at it, or compute the
//   softmax in fp32 (softmax(x, dtype=torch.float32).to(torch.float16); autocast does this
//   for softmax) and cast only the probabilities. Scale the logits (1/sqrt(d)) before fp16.
//
// Evidence
//   keras-team/keras#17571, google/flax#982, huggingface/transformers#17306,
//   pytorch/pytorch#60939 (scenario.json "evidence" says what each shows).
#include "pitfall/random.hpp"
#include "pitfall/scenario.hpp"

// The software fp16 converter of the dtype_casting scenario (one header, no CUDA types).
#include "../dtype_casting/soft_float.hpp"

#if PITFALL_HAS_CUDA
#include <cuda_fp16.h>
#endif

#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

namespace {

using dtype_casting::soft_fp16_bits;
using dtype_casting::soft_fp16_to_float;

// fp16 values travel as their 16-bit patterns, so host code never needs cuda_fp16.h.
PITFALL_HOST_DEVICE inline std::uint16_t to_fp16(float x) {
#if defined(__CUDA_ARCH__)
    return __half_as_ushort(__float2half_rn(x));
#else
    return soft_fp16_bits(x);
#endif
}
PITFALL_HOST_DEVICE inline float from_fp16(std::uint16_t h) {
#if defined(__CUDA_ARCH__)
    return __half2float(__ushort_as_half(h));
#else
    return soft_fp16_to_float(h);
#endif
}
// An fp16 addition: __hadd on the GPU; on the host the fp32 sum rounded to fp16. fp32 carries
// 24 bits, at least 2 x 11 + 2 for fp16's 11, so rounding twice gives the correctly rounded fp16
// sum (Figueroa, "When is double rounding innocuous?", 1995): what __hadd returns.
PITFALL_HOST_DEVICE inline std::uint16_t add_fp16(std::uint16_t a, std::uint16_t b) {
#if defined(__CUDA_ARCH__)
    return __half_as_ushort(__hadd(__ushort_as_half(a), __ushort_as_half(b)));
#else
    return soft_fp16_bits(soft_fp16_to_float(a) + soft_fp16_to_float(b));
#endif
}

constexpr float fp16_lowest = -65504.f; // torch.finfo(torch.float16).min

/// How a score reaches the softmax.
enum class score_path : int {
    fp16_added_mask,   // fp16 score + fp16(mask): the reproduce variants
    fp16_clamped_mask, // fp32 score + mask, clamped at -65504, stored as fp16: remedy 1
    fp32,              // fp32 score + mask, kept in fp32: remedy 2
};

/// One thread per row: the masked softmax of that row, the probabilities stored as fp16.
/// Keys at or past `valid[r]` are masked. The arithmetic after the score is fp32, as the
/// frameworks' fp16 softmax kernels do it (load fp16, compute in fp32, store fp16).
struct masked_softmax {
    const float* logits;       // rows x cols, fp32 as produced
    const std::int32_t* valid; // per row: keys [0, valid) are attended
    std::uint16_t* probs;      // rows x cols, fp16 bits
    std::int32_t* inf_scores;  // per row: infinite scores fed to the softmax
    int cols;
    float mask_value;
    score_path path;

    PITFALL_HOST_DEVICE float score(std::size_t row, int c) const {
        const float x = logits[row * static_cast<std::size_t>(cols) + c];
        const bool masked = c >= valid[row];
        switch (path) {
        case score_path::fp16_added_mask: {
            const std::uint16_t adder = masked ? to_fp16(mask_value) : to_fp16(0.f);
            return from_fp16(add_fp16(to_fp16(x), adder));
        }
        case score_path::fp16_clamped_mask: {
            const float s = x + (masked ? mask_value : 0.f);
            return from_fp16(to_fp16(s < fp16_lowest ? fp16_lowest : s));
        }
        case score_path::fp32: break;
        }
        return x + (masked ? mask_value : 0.f);
    }

    PITFALL_HOST_DEVICE void operator()(std::size_t row) const {
        float row_max = -INFINITY;
        std::int32_t infinities = 0;
        for (int c = 0; c < cols; ++c) {
            const float s = score(row, c);
            infinities += (s == INFINITY || s == -INFINITY) ? 1 : 0;
            row_max = s > row_max ? s : row_max;
        }
        float sum = 0.f;
        for (int c = 0; c < cols; ++c)
            sum += expf(score(row, c) - row_max);
        for (int c = 0; c < cols; ++c)
            probs[row * static_cast<std::size_t>(cols) + c] =
                to_fp16(expf(score(row, c) - row_max) / sum);
        inf_scores[row] = infinities;
    }
};

struct problem {
    int rows = 0;
    int cols = 0;
    std::vector<float> logits;
    std::vector<std::int32_t> valid;
    long long fully_masked_rows = 0;
    long long overflow_rows = 0;
    long long masked_keys = 0;
};

/// Logits uniform in [-8, 8) (scaled attention scores); every `masked_every`-th row (offset
/// masked_every - 1) fully masked, the others attending a prefix of 1..cols keys; with
/// `overflow`, every `overflow_every`-th row from 0 that is not fully masked gets one unscaled
/// logit at key 0 (always attended).
pitfall::status_or<problem> make_problem(pitfall::context& ctx, bool overflow) {
    PITFALL_ASSIGN_OR_RETURN(const long long rows, ctx.param_int("rows"));
    PITFALL_ASSIGN_OR_RETURN(const long long cols, ctx.param_int("cols"));
    PITFALL_ASSIGN_OR_RETURN(const long long masked_every, ctx.param_int("masked_row_every"));
    PITFALL_ASSIGN_OR_RETURN(const long long overflow_every, ctx.param_int("overflow_row_every"));
    PITFALL_ASSIGN_OR_RETURN(const double overflow_logit, ctx.param_double("overflow_logit"));
    if (masked_every > rows)
        return pitfall::bad_parameter("masked_row_every",
                                      "larger than rows: no row is fully masked");
    problem p;
    p.rows = static_cast<int>(rows);
    p.cols = static_cast<int>(cols);
    p.logits.resize(static_cast<std::size_t>(rows * cols));
    p.valid.resize(static_cast<std::size_t>(rows));
    pitfall::splitmix64 rng(17571);
    for (auto& x : p.logits)
        x = static_cast<float>(rng.uniform(-8.0, 8.0));
    for (long long r = 0; r < rows; ++r) {
        const bool fully_masked = r % masked_every == masked_every - 1;
        p.valid[r] = fully_masked ? 0 : static_cast<std::int32_t>(1 + rng.next() % cols);
        p.fully_masked_rows += fully_masked ? 1 : 0;
        p.masked_keys += cols - p.valid[r];
        if (overflow && !fully_masked && r % overflow_every == 0) {
            p.logits[static_cast<std::size_t>(r * cols)] = static_cast<float>(overflow_logit);
            ++p.overflow_rows;
        }
    }
    return p;
}

struct outcome {
    long long nan_rows = 0;
    long long inf_scores = 0;
    long long finite_rows = 0;
    double max_abs_error = 0.0; // over the rows with no NaN
};

/// The float64 softmax of each row over its attended keys (a fully masked row: uniform, what
/// any finite mask gives), from `inputs` (the logits as the softmax sees them), against the
/// backend's fp16 probabilities.
outcome judge(const problem& p, const std::vector<double>& inputs,
              const std::vector<std::uint16_t>& probs, const std::vector<std::int32_t>& infs) {
    outcome o;
    std::vector<double> want(static_cast<std::size_t>(p.cols));
    for (int r = 0; r < p.rows; ++r) {
        const std::size_t base = static_cast<std::size_t>(r) * p.cols;
        const int n = p.valid[r];
        if (n == 0) {
            want.assign(want.size(), 1.0 / p.cols);
        } else {
            double top = -std::numeric_limits<double>::infinity();
            for (int c = 0; c < n; ++c)
                top = std::fmax(top, inputs[base + c]);
            double total = 0.0;
            for (int c = 0; c < n; ++c)
                total += std::exp(inputs[base + c] - top);
            for (int c = 0; c < p.cols; ++c)
                want[c] = c < n ? std::exp(inputs[base + c] - top) / total : 0.0;
        }
        bool row_nan = false;
        double row_error = 0.0;
        for (int c = 0; c < p.cols; ++c) {
            const double got = soft_fp16_to_float(probs[base + c]);
            row_nan = row_nan || std::isnan(got);
            row_error = std::fmax(row_error, std::fabs(got - want[c]));
        }
        o.inf_scores += infs[r];
        if (row_nan) {
            ++o.nan_rows;
        } else {
            ++o.finite_rows;
            o.max_abs_error = std::fmax(o.max_abs_error, row_error);
        }
    }
    return o;
}

template <class Backend>
pitfall::status run(pitfall::context& ctx, bool overflow, score_path path, float mask_value,
                    outcome& o, problem& p) {
    PITFALL_ASSIGN_OR_RETURN(p, make_problem(ctx, overflow));
    const std::size_t cells = p.logits.size();
    PITFALL_ASSIGN_OR_RETURN(auto d_logits, Backend::template allocate<float>(cells));
    PITFALL_ASSIGN_OR_RETURN(auto d_valid,
                             Backend::template allocate<std::int32_t>(p.valid.size()));
    PITFALL_ASSIGN_OR_RETURN(auto d_probs, Backend::template allocate<std::uint16_t>(cells));
    PITFALL_ASSIGN_OR_RETURN(auto d_infs, Backend::template allocate<std::int32_t>(p.valid.size()));
    PITFALL_TRY(Backend::copy_to_device(d_logits, p.logits.data(), cells));
    PITFALL_TRY(Backend::copy_to_device(d_valid, p.valid.data(), p.valid.size()));
    PITFALL_TRY(Backend::for_each(static_cast<std::size_t>(p.rows),
                                  masked_softmax{d_logits.data(), d_valid.data(), d_probs.data(),
                                                 d_infs.data(), p.cols, mask_value, path}));
    PITFALL_TRY(Backend::synchronize());
    std::vector<std::uint16_t> probs(cells);
    std::vector<std::int32_t> infs(p.valid.size());
    PITFALL_TRY(Backend::copy_to_host(probs.data(), d_probs, cells));
    PITFALL_TRY(Backend::copy_to_host(infs.data(), d_infs, infs.size()));
    ctx.ran_on(Backend::describe_device());

    // The reference sees the logits as the softmax does: fp16-rounded on the fp16 paths where
    // that is finite (the rows whose fp16 value is inf end NaN and are counted, not compared),
    // fp32 otherwise.
    std::vector<double> inputs(cells);
    for (std::size_t i = 0; i < cells; ++i) {
        const float rounded = soft_fp16_to_float(soft_fp16_bits(p.logits[i]));
        inputs[i] = path != score_path::fp32 && std::isfinite(rounded) ? rounded : p.logits[i];
    }
    o = judge(p, inputs, probs, infs);
    ctx.record("rows", p.rows);
    ctx.record("fully_masked_rows", static_cast<double>(p.fully_masked_rows));
    ctx.record("overflow_rows", static_cast<double>(p.overflow_rows));
    ctx.record("nan_rows", static_cast<double>(o.nan_rows));
    ctx.record("inf_scores", static_cast<double>(o.inf_scores));
    ctx.record("max_abs_error", o.max_abs_error);
    ctx.record_info("mask_value_as_fp16",
                    std::to_string(soft_fp16_to_float(soft_fp16_bits(mask_value))));
    // Output rounding to fp16 (half an ulp below 1 is 2^-12) plus fp32 exp/sum error: 2^-11.
    std::ostringstream d;
    d << "largest |p - p_float64| over " << o.finite_rows
      << " rows without NaN: " << o.max_abs_error << " (bound 2^-11 = 4.88e-4)";
    ctx.check("finite_rows_match_float64", o.finite_rows > 0 && o.max_abs_error <= 0x1p-11,
              d.str());
    return pitfall::status::ok();
}

std::string count_detail(const char* what, long long got, long long want) {
    return std::string(what) + ": " + std::to_string(got) + ", expected " + std::to_string(want);
}

} // namespace

// reproduce_mask_minus_1e9: fp16 scores + fp16(-1e9) = -inf; fully masked rows are NaN.
template <class Backend> pitfall::status reproduce_mask_minus_1e9(pitfall::context& ctx) {
    PITFALL_ASSIGN_OR_RETURN(const double mask, ctx.param_double("mask_value"));
    outcome o;
    problem p;
    PITFALL_TRY(
        run<Backend>(ctx, false, score_path::fp16_added_mask, static_cast<float>(mask), o, p));
    ctx.check("mask_constant_is_minus_inf_in_fp16",
              std::isinf(soft_fp16_to_float(soft_fp16_bits(static_cast<float>(mask)))),
              "fp16(" + std::to_string(mask) + ") must overflow to -inf (|mask| >= 65520)");
    ctx.check("fully_masked_rows_are_nan", o.nan_rows == p.fully_masked_rows,
              count_detail("NaN rows", o.nan_rows, p.fully_masked_rows));
    ctx.check("masked_scores_are_minus_inf", o.inf_scores == p.masked_keys,
              count_detail("infinite scores", o.inf_scores, p.masked_keys));
    return pitfall::status::ok();
}

// reproduce_logit_overflow: a logit of 70000 is +inf in fp16; inf - inf makes its row NaN.
// The mask here is fp16's lowest finite, so the NaN rows are the overflow's alone.
template <class Backend> pitfall::status reproduce_logit_overflow(pitfall::context& ctx) {
    outcome o;
    problem p;
    PITFALL_TRY(run<Backend>(ctx, true, score_path::fp16_clamped_mask, fp16_lowest, o, p));
    ctx.check("overflow_rows_are_nan", o.nan_rows == p.overflow_rows && p.overflow_rows > 0,
              count_detail("NaN rows", o.nan_rows, p.overflow_rows));
    ctx.check("overflow_logits_are_inf", o.inf_scores == p.overflow_rows,
              count_detail("infinite scores", o.inf_scores, p.overflow_rows));
    return pitfall::status::ok();
}

// remedy_finite_mask: s + mask in fp32, clamped at -65504, then fp16: every row finite.
template <class Backend> pitfall::status remedy_finite_mask(pitfall::context& ctx) {
    PITFALL_ASSIGN_OR_RETURN(const double mask, ctx.param_double("mask_value"));
    outcome o;
    problem p;
    PITFALL_TRY(
        run<Backend>(ctx, false, score_path::fp16_clamped_mask, static_cast<float>(mask), o, p));
    ctx.check("no_nan_rows", o.nan_rows == 0, count_detail("NaN rows", o.nan_rows, 0));
    ctx.check("no_infinite_scores", o.inf_scores == 0,
              count_detail("infinite scores", o.inf_scores, 0));
    return pitfall::status::ok();
}

// remedy_fp32_softmax: the masked, overflowing rows computed in fp32; only p is cast to fp16.
template <class Backend> pitfall::status remedy_fp32_softmax(pitfall::context& ctx) {
    PITFALL_ASSIGN_OR_RETURN(const double mask, ctx.param_double("mask_value"));
    outcome o;
    problem p;
    PITFALL_TRY(run<Backend>(ctx, true, score_path::fp32, static_cast<float>(mask), o, p));
    ctx.check("no_nan_rows", o.nan_rows == 0 && p.overflow_rows > 0 && p.fully_masked_rows > 0,
              count_detail("NaN rows", o.nan_rows, 0) + " (with " +
                  std::to_string(p.overflow_rows) + " overflow and " +
                  std::to_string(p.fully_masked_rows) + " fully masked rows)");
    ctx.check("no_infinite_scores", o.inf_scores == 0,
              count_detail("infinite scores", o.inf_scores, 0));
    return pitfall::status::ok();
}

PITFALL_SCENARIO(PITFALL_VARIANT(reproduce_mask_minus_1e9),
                 PITFALL_VARIANT(reproduce_logit_overflow), PITFALL_VARIANT(remedy_finite_mask),
                 PITFALL_VARIANT(remedy_fp32_softmax))
