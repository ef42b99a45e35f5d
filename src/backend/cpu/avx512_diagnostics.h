// Included first by each file compiled for AVX-512 (the *_avx512.cpp
// files): GCC 12's AVX-512 intrinsics self-initialize their "undefined"
// operands, which -Wuninitialized reports at every use (GCC bug 105593).
// A pragma in a header holds for the rest of the file that includes it.
#pragma once

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
