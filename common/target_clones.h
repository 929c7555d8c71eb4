// R2SP_TARGET_CLONES before a function with a hot, vectorisable loop: GCC compiles it for
// AVX-512F, AVX2 and baseline x86-64 and picks the widest this CPU runs, at load time. Expands
// to nothing on other compilers and architectures. R2SP_FMA_TARGET_CLONES for loops that call
// std::fma (to round as another library's fused multiply-adds do): its clones have FMA
// instructions (Skylake-AVX512, Haswell), and the baseline one calls libm's exact fmaf.
#ifndef R2SP_COMMON_TARGET_CLONES_H_
#define R2SP_COMMON_TARGET_CLONES_H_

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define R2SP_TARGET_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#define R2SP_FMA_TARGET_CLONES \
  __attribute__((target_clones("arch=skylake-avx512", "arch=haswell", "default")))
#else
#define R2SP_TARGET_CLONES
#define R2SP_FMA_TARGET_CLONES
#endif

#endif  // R2SP_COMMON_TARGET_CLONES_H_
