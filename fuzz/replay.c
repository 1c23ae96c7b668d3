/* Replays files through a fuzz target's LLVMFuzzerTestOneInput without
 * libFuzzer, so the seed corpora and every crash ever found (fuzz/regressions/)
 * run as ordinary ctest tests in the gcc builds, sanitizers included.
 * Arguments are files or folders (every file in a folder, in name order);
 * a folder that does not exist is skipped, saying so. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

static int replay_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) { fprintf(stderr, "replay: cannot open %s\n", path); return 0; }
    uint8_t *buf = NULL;
    size_t size = 0, cap = 0;
    for (;;) {
        if (size == cap) {
            cap = cap ? cap * 2 : 65536;
            uint8_t *nb = realloc(buf, cap);
            if (!nb) { free(buf); fclose(f); fprintf(stderr, "replay: out of memory\n"); return 0; }
            buf = nb;
        }
        size_t got = fread(buf + size, 1, cap - size, f);
        if (got == 0) break;
        size += got;
    }
    fclose(f);
    /* an exact-size copy, so ASan sees a read past the input's end */
    uint8_t *exact = malloc(size ? size : 1);
    if (!exact) { free(buf); return 0; }
    if (size) memcpy(exact, buf, size);
    free(buf);
    LLVMFuzzerTestOneInput(exact, size);
    free(exact);
    return 1;
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int main(int argc, char **argv) {
    if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
    int n = 0;
    for (int i = 1; i < argc; i++) {
        struct stat sb;
        if (stat(argv[i], &sb) != 0) { printf("replay: %s absent, skipped\n", argv[i]); continue; }
        if (!S_ISDIR(sb.st_mode)) { n += replay_file(argv[i]); continue; }
        DIR *d = opendir(argv[i]);
        if (!d) continue;
        char **names = NULL;
        size_t count = 0;
        for (struct dirent *e; (e = readdir(d));) {
            if (e->d_name[0] == '.') continue;
            char **nn = realloc(names, (count + 1) * sizeof *names);
            if (!nn) break;
            names = nn;
            size_t len = strlen(argv[i]) + strlen(e->d_name) + 2;
            if (!(names[count] = malloc(len))) break;
            snprintf(names[count++], len, "%s/%s", argv[i], e->d_name);
        }
        closedir(d);
        if (count > 1) qsort(names, count, sizeof *names, by_name);
        for (size_t j = 0; j < count; j++) {
            n += replay_file(names[j]);
            free(names[j]);
        }
        free(names);
    }
    printf("replayed %d inputs\n", n);
    return 0;
}
