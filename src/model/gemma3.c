/* Gemma 3: served in a later step (issue 4). */
#include "core/error.h"
#include "model/model_impl.h"

okv_status okv_gemma3_load(okv_model *m, okv_error *err) {
    (void)m;
    return okv_fail(err, OKV_ERR_UNSUPPORTED, "model: architecture gemma3 is not served yet");
}
