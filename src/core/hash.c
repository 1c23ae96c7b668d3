#include <stdint.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "core/hash.h"

void okv_hash_key_new(okv_hash_key *key) {
    uint64_t k[2];
    if (getrandom(k, sizeof k, GRND_NONBLOCK) == (ssize_t)sizeof k) {
        key->k0 = k[0];
        key->k1 = k[1];
        return;
    }
    /* No entropy from the OS (an old kernel, a seccomp filter): what varies
     * between runs and tables, mixed so nearby values spread. */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    const okv_hash_key mix = {0x9e3779b97f4a7c15ull, (uint64_t)(uintptr_t)key};
    const uint64_t seed[3] = {(uint64_t)ts.tv_sec, (uint64_t)ts.tv_nsec, (uint64_t)getpid()};
    key->k0 = okv_siphash(&mix, seed, sizeof seed, 2, 4);
    key->k1 = okv_siphash(&mix, &key->k0, sizeof key->k0, 2, 4);
}
