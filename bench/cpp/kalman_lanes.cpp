// The compiled C++ ceiling: `kalman2d_T80`'s negative log-likelihood and its gradient in (q, r),
// structure of arrays over blocks of lanes, as a C++ programmer writes it for speed.
//
// Built by `bench/build.rs` with the system compiler (`$CXX`, else `c++`) at `-O3 -march=native`
// when one is present; the bench then times it beside the interpreter in the same run. The math is
// the Rust lane ceiling's (`bench/src/ceiling_lanes.rs`): general 2x2 closed forms, one division
// per step, forward-mode tangents through the matrix identities, fdlibm's `log` written over the
// lanes so that it vectorises (glibc's vector log needs -ffast-math). Each block runs the whole
// filter for W lanes with its state in aligned arrays; every step is one loop over the lanes with
// a branch-free body, which GCC and Clang vectorise in the machine's widest vectors. Two builds of
// the same source: `fast` with the compiler's default contraction of a*b+c into FMA (the
// fastest), `exact` with -ffp-contract=off (the Rust ceiling's bits, to check the two agree).
//
// No C++ runtime: no exceptions, no allocation, no libstdc++; C linkage only.

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <math.h>

#ifndef NDVM_CPP_SUFFIX
#define NDVM_CPP_SUFFIX fast
#endif
#define NDVM_CAT2(a, b) a##_##b
#define NDVM_CAT(a, b) NDVM_CAT2(a, b)
#define NDVM_NAME(base) NDVM_CAT(base, NDVM_CPP_SUFFIX)

namespace {

template <class T> struct Log;

// fdlibm's log (musl's), the normal-positive path only; the caller sends other inputs to libm.
template <> struct Log<double> {
    static inline uint64_t bits(double v) {
        uint64_t b;
        memcpy(&b, &v, 8);
        return b;
    }
    static inline double of_bits(uint64_t b) {
        double v;
        memcpy(&v, &b, 8);
        return v;
    }
    static inline bool normal(double v) {
        return bits(v) - (uint64_t(1) << 52) < (uint64_t(0x7fe) << 52);
    }
    static inline double fast(double v) {
        const double ln2_hi = of_bits(0x3fe62e42fee00000ull);
        const double ln2_lo = of_bits(0x3dea39ef35793c76ull);
        const double lg1 = of_bits(0x3fe5555555555593ull), lg2 = of_bits(0x3fd999999997fa04ull),
                     lg3 = of_bits(0x3fd2492494229359ull), lg4 = of_bits(0x3fcc71c51d8e78afull),
                     lg5 = of_bits(0x3fc7466496cb03deull), lg6 = of_bits(0x3fc39a09d078c69full),
                     lg7 = of_bits(0x3fc2f112df3e5244ull);
        uint64_t ix = bits(v);
        uint64_t hx = (ix >> 32) + (0x3ff00000 - 0x3fe6a09e);
        double k = double(int32_t(hx >> 20) - 0x3ff);
        hx = (hx & 0x000fffff) + 0x3fe6a09e;
        double f = of_bits((hx << 32) | (ix & 0xffffffffull)) - 1.0;
        double hfsq = 0.5 * f * f;
        double s = f / (2.0 + f);
        double z = s * s;
        double w = z * z;
        double t1 = w * (lg2 + w * (lg4 + w * lg6));
        double t2 = z * (lg1 + w * (lg3 + w * (lg5 + w * lg7)));
        double r = t2 + t1;
        return s * (hfsq + r) + k * ln2_lo - hfsq + f + k * ln2_hi;
    }
    static inline double slow(double v) { return log(v); }
};

template <> struct Log<float> {
    static inline uint32_t bits(float v) {
        uint32_t b;
        memcpy(&b, &v, 4);
        return b;
    }
    static inline float of_bits(uint32_t b) {
        float v;
        memcpy(&v, &b, 4);
        return v;
    }
    static inline bool normal(float v) { return bits(v) - (1u << 23) < (0xfeu << 23); }
    static inline float fast(float v) {
        const float ln2_hi = of_bits(0x3f317180u), ln2_lo = of_bits(0x3717f7d1u);
        const float lg1 = of_bits(0x3f2aaaaau), lg2 = of_bits(0x3eccce13u), lg3 = of_bits(0x3e91e9eeu),
                    lg4 = of_bits(0x3e789e26u);
        uint32_t ix = bits(v) + (0x3f800000u - 0x3f3504f3u);
        float k = float(int32_t(ix >> 23) - 0x7f);
        float f = of_bits((ix & 0x007fffffu) + 0x3f3504f3u) - 1.0f;
        float s = f / (2.0f + f);
        float z = s * s;
        float w = z * z;
        float t1 = w * (lg2 + w * lg4);
        float t2 = z * (lg1 + w * lg3);
        float r = t2 + t1;
        float hfsq = 0.5f * f * f;
        return s * (hfsq + r) + k * ln2_lo - hfsq + f + k * ln2_hi;
    }
    static inline float slow(float v) { return logf(v); }
};

// The filter's state for one block of W lanes, every quantity an aligned array over the lanes.
template <class T, int W> struct Block {
    alignas(64) T x[2][W];
    alignas(64) T p[4][W];
    alignas(64) T dx[2][2][W];  // [tangent][component][lane]
    alignas(64) T dp[2][4][W];
    alignas(64) T quad[W];
    alignas(64) T dquad[2][W];
    alignas(64) T logdet[W];
    alignas(64) T dlogdet[2][W];
    alignas(64) T det[W];
    alignas(64) T q[W];
    alignas(64) T r[W];
};

// The tangent of one lane's step in q (G = 0) or r (G = 1); a function with G fixed, so that the
// lane loop holds straight-line code the compiler vectorises (a loop over G inside it stops GCC).
template <class T, int W, int G>
static inline __attribute__((always_inline)) void tangent(
    Block<T, W>& b, int l, T inv, T s0, T s1, T s2, T s3, T si0, T si1, T si2, T si3, T pp0, T pp1,
    T pp2, T pp3, T k0, T k1, T k2, T k3, T m0, T m1, T m2, T m3, T e0, T e1, T se0, T se1) {
    const int g = G;
    const T one = T(1);
    const T cq = g == 0 ? one : T(0), cr = g == 0 ? T(0) : one;
    const T dpp0 = b.dp[g][0][l] + cq, dpp1 = b.dp[g][1][l], dpp2 = b.dp[g][2][l],
            dpp3 = b.dp[g][3][l] + cq;
    const T ds0 = dpp0 + cr, ds1 = dpp1, ds2 = dpp2, ds3 = dpp3 + cr;
    const T ddet = ds0 * s3 + s0 * ds3 - ds1 * s2 - s1 * ds2;
    const T dsi0 = (ds3 - si0 * ddet) * inv, dsi1 = (-ds1 - si1 * ddet) * inv,
            dsi2 = (-ds2 - si2 * ddet) * inv, dsi3 = (ds0 - si3 * ddet) * inv;
    const T dk0 = (dpp0 * si0 + dpp1 * si2) + (pp0 * dsi0 + pp1 * dsi2);
    const T dk1 = (dpp0 * si1 + dpp1 * si3) + (pp0 * dsi1 + pp1 * dsi3);
    const T dk2 = (dpp2 * si0 + dpp3 * si2) + (pp2 * dsi0 + pp3 * dsi2);
    const T dk3 = (dpp2 * si1 + dpp3 * si3) + (pp2 * dsi1 + pp3 * dsi3);
    const T de0 = -b.dx[g][0][l], de1 = -b.dx[g][1][l];
    const T dse0 = (dsi0 * e0 + dsi1 * e1) + (si0 * de0 + si1 * de1);
    const T dse1 = (dsi2 * e0 + dsi3 * e1) + (si2 * de0 + si3 * de1);
    b.dquad[g][l] = b.dquad[g][l] + (de0 * se0 + de1 * se1 + e0 * dse0 + e1 * dse1);
    b.dlogdet[g][l] = b.dlogdet[g][l] + ddet * inv;
    const T dke0 = (dk0 * e0 + dk1 * e1) + (k0 * de0 + k1 * de1);
    const T dke1 = (dk2 * e0 + dk3 * e1) + (k2 * de0 + k3 * de1);
    b.dx[g][0][l] = b.dx[g][0][l] + dke0;
    b.dx[g][1][l] = b.dx[g][1][l] + dke1;
    b.dp[g][0][l] = (m0 * dpp0 + m1 * dpp2) + (-dk0 * pp0 + -dk1 * pp2);
    b.dp[g][1][l] = (m0 * dpp1 + m1 * dpp3) + (-dk0 * pp1 + -dk1 * pp3);
    b.dp[g][2][l] = (m2 * dpp0 + m3 * dpp2) + (-dk2 * pp0 + -dk3 * pp2);
    b.dp[g][3][l] = (m2 * dpp1 + m3 * dpp3) + (-dk2 * pp1 + -dk3 * pp3);
}

// One filter step on every lane (with tangents when GRAD): the Rust ceiling's operations, in its
// order, per lane.
template <class T, int W, bool GRAD>
static inline void step(Block<T, W>& b, T y0, T y1) {
#pragma GCC ivdep
    for (int l = 0; l < W; ++l) {
        const T one = T(1), q = b.q[l], r = b.r[l];
        const T pp0 = b.p[0][l] + q, pp1 = b.p[1][l], pp2 = b.p[2][l], pp3 = b.p[3][l] + q;
        const T s0 = pp0 + r, s1 = pp1, s2 = pp2, s3 = pp3 + r;
        const T det = s0 * s3 - s1 * s2;
        const T inv = one / det;
        const T si0 = s3 * inv, si1 = -(s1 * inv), si2 = -(s2 * inv), si3 = s0 * inv;
        const T k0 = pp0 * si0 + pp1 * si2, k1 = pp0 * si1 + pp1 * si3;
        const T k2 = pp2 * si0 + pp3 * si2, k3 = pp2 * si1 + pp3 * si3;
        const T e0 = y0 - b.x[0][l], e1 = y1 - b.x[1][l];
        const T se0 = si0 * e0 + si1 * e1, se1 = si2 * e0 + si3 * e1;
        const T ke0 = k0 * e0 + k1 * e1, ke1 = k2 * e0 + k3 * e1;
        const T m0 = one - k0, m1 = -k1, m2 = -k2, m3 = one - k3;
        b.quad[l] = b.quad[l] + (e0 * se0 + e1 * se1);
        b.det[l] = det;
        if (GRAD) {
            tangent<T, W, 0>(b, l, inv, s0, s1, s2, s3, si0, si1, si2, si3, pp0, pp1, pp2, pp3, k0,
                             k1, k2, k3, m0, m1, m2, m3, e0, e1, se0, se1);
            tangent<T, W, 1>(b, l, inv, s0, s1, s2, s3, si0, si1, si2, si3, pp0, pp1, pp2, pp3, k0,
                             k1, k2, k3, m0, m1, m2, m3, e0, e1, se0, se1);
        }
        b.x[0][l] = b.x[0][l] + ke0;
        b.x[1][l] = b.x[1][l] + ke1;
        b.p[0][l] = m0 * pp0 + m1 * pp2;
        b.p[1][l] = m0 * pp1 + m1 * pp3;
        b.p[2][l] = m2 * pp0 + m3 * pp2;
        b.p[3][l] = m2 * pp1 + m3 * pp3;
    }
    bool normal = true;
    for (int l = 0; l < W; ++l) normal &= Log<T>::normal(b.det[l]);
    if (normal) {
#pragma GCC ivdep
        for (int l = 0; l < W; ++l) b.logdet[l] = b.logdet[l] + Log<T>::fast(b.det[l]);
    } else {
        for (int l = 0; l < W; ++l) b.logdet[l] = b.logdet[l] + Log<T>::slow(b.det[l]);
    }
}

// The W lanes from `start` (padded with the last lane), tangents when GRAD.
template <class T, int W, bool GRAD>
static void run_block(const double* obs, size_t steps, const double* q, const double* r, size_t n,
                      size_t start, double* value, double* grad) {
    Block<T, W> b;
    memset(&b, 0, sizeof b);
    for (int l = 0; l < W; ++l) {
        size_t lane = start + l < n ? start + l : n - 1;
        b.q[l] = T(q[lane]);
        b.r[l] = T(r[lane]);
        b.p[0][l] = T(1);
        b.p[3][l] = T(1);
    }
    for (size_t t = 0; t < steps; ++t) step<T, W, GRAD>(b, T(obs[2 * t]), T(obs[2 * t + 1]));
    for (int l = 0; l < W && start + l < n; ++l) {
        value[start + l] = double(b.logdet[l] + b.quad[l]);
        if (GRAD) {
            grad[2 * (start + l)] = double(b.dlogdet[0][l] + b.dquad[0][l]);
            grad[2 * (start + l) + 1] = double(b.dlogdet[1][l] + b.dquad[1][l]);
        }
    }
}

template <class T, int W>
static void run(const double* obs, size_t steps, const double* q, const double* r, size_t n,
                int with_grad, double* value, double* grad) {
    for (size_t start = 0; start < n; start += W) {
        if (with_grad)
            run_block<T, W, true>(obs, steps, q, r, n, start, value, grad);
        else
            run_block<T, W, false>(obs, steps, q, r, n, start, value, grad);
    }
}

}  // namespace

extern "C" {

// The NLL at every lane's (q[l], r[l]) into value[l], and with `with_grad` its gradient into
// grad[2l], grad[2l+1] (d/dq, d/dr); `obs` holds `steps` observations as (y0, y1) pairs.
void NDVM_NAME(ndvm_kalman_cpp_f64)(const double* obs, size_t steps, const double* q,
                                    const double* r, size_t n, int with_grad, double* value,
                                    double* grad) {
    run<double, NDVM_CPP_LANES_F64>(obs, steps, q, r, n, with_grad, value, grad);
}

// As the f64 version, every operation in f32 (inputs rounded once, results widened).
void NDVM_NAME(ndvm_kalman_cpp_f32)(const double* obs, size_t steps, const double* q,
                                    const double* r, size_t n, int with_grad, double* value,
                                    double* grad) {
    run<float, NDVM_CPP_LANES_F32>(obs, steps, q, r, n, with_grad, value, grad);
}

// The lanes per block and the vector width this build was compiled for (bits), for the report.
int NDVM_NAME(ndvm_kalman_cpp_lanes_f64)(void) { return NDVM_CPP_LANES_F64; }
int NDVM_NAME(ndvm_kalman_cpp_vector_bits)(void) {
#if defined(__AVX512F__)
    return 512;
#elif defined(__AVX__)
    return 256;
#elif defined(__SSE2__) || defined(__ARM_NEON)
    return 128;
#else
    return 64;
#endif
}

}  // extern "C"
