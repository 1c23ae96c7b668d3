/* Row encoders for offkv synth, in a file of their own because the
 * kernels' quant.h and the public gguf.h both declare okv_ggml_type and
 * cannot share a translation unit.  The quantizers are the kernels' (ggml's
 * reference rounding), so synthetic files hold what llama.cpp would write. */
#include "kernels/quant.h"
#include "synth_quant.h"

int synth_encode_row(int type, const float *x, void *dst, int64_t k) {
    switch (type) {
    case SYNTH_F32: memcpy(dst, x, (size_t)k * sizeof *x); return 1;
    case SYNTH_F16: okv_f32_to_f16_row(dst, x, k); return 1;
    case SYNTH_Q8_0: okv_quantize_row_q8_0(x, dst, k); return 1;
    case SYNTH_Q4_0: okv_quantize_row_q4_0(x, dst, k); return 1;
    }
    return 0;
}
