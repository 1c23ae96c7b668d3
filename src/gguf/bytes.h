/* Internal: little-endian loads and stores, independent of the host's byte
 * order and of alignment (GGUF values sit at any byte offset). */
#ifndef OKV_GGUF_BYTES_H
#define OKV_GGUF_BYTES_H

#include <stdint.h>
#include <string.h>

static inline uint16_t okv_ld16(const uint8_t *p) {
    return (uint16_t)(p[0] | (uint16_t)p[1] << 8);
}
static inline uint32_t okv_ld32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t okv_ld64(const uint8_t *p) {
    return (uint64_t)okv_ld32(p) | (uint64_t)okv_ld32(p + 4) << 32;
}
static inline float okv_ldf32(const uint8_t *p) {
    uint32_t u = okv_ld32(p);
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
static inline double okv_ldf64(const uint8_t *p) {
    uint64_t u = okv_ld64(p);
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}
static inline void okv_st32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline void okv_st64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* Byte size of a fixed-size GGUF value type, 0 for string/array/unknown. */
static inline uint64_t okv_gguf_fixed_size(uint32_t t) {
    switch (t) {
    case 0: case 1: case 7: return 1;  /* u8, i8, bool */
    case 2: case 3: return 2;          /* u16, i16 */
    case 4: case 5: case 6: return 4;  /* u32, i32, f32 */
    case 10: case 11: case 12: return 8; /* u64, i64, f64 */
    default: return 0;
    }
}

#endif
