/* gpt-oss stub */
#include "core/error.h"
#include "model/model_impl.h"
okv_status okv_gpt_oss_load(okv_model *m, okv_error *err) {
    return okv_fail(err, OKV_ERR_UNSUPPORTED, "model: %s: not yet", m->arch_name);
}
