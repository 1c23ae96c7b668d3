/* offkv synth: encoding rows of floats into the ggml types it writes. */
#ifndef OFFKV_TOOL_SYNTH_QUANT_H
#define OFFKV_TOOL_SYNTH_QUANT_H

#include <stdint.h>

/* ggml's type numbers (as in a GGUF tensor header). */
enum { SYNTH_F32 = 0, SYNTH_F16 = 1, SYNTH_Q4_0 = 2, SYNTH_Q8_0 = 8 };

/* Encodes k floats (a multiple of 32 for the quantized types) as one row of
 * type into dst; returns 0 for a type it does not write. */
int synth_encode_row(int type, const float *x, void *dst, int64_t k);

#endif
