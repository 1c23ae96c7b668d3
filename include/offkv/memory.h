/* offkv — memory the library hands to the caller.
 *
 * Some functions return text the caller owns (okv_chat_template_render's
 * prompt, okv_json_schema_to_gbnf's grammar): free it with free(), or with
 * okv_free, which is the library's own free() — for a binding or a program
 * whose free() may not be the one the library's malloc() pairs with. */
#ifndef OFFKV_MEMORY_H
#define OFFKV_MEMORY_H

#ifdef __cplusplus
extern "C" {
#endif

/* Frees p, which the library allocated for the caller.  NULL is a no-op. */
void okv_free(void *p);

#ifdef __cplusplus
}
#endif
#endif
