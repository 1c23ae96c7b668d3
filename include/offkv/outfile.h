/* offkv — writing a file so that a failed or killed write never destroys
 * what was there (the GGUF writer and the prompt cache write this way, and
 * so can a program that writes its own results).
 *
 * A regular file (new, or existing, also reached through a symlink) is
 * written to a temporary file beside its real target and renamed over it
 * only when every byte is on its way: the old contents stay whole until
 * then, and a reader that mapped the old file keeps its own copy of the data
 * (no SIGBUS from a rewrite in place).  Anything else that already exists
 * under the name (a device such as /dev/stdout or /dev/full, a FIFO) is
 * written directly, and is never removed: nothing is deleted that this run
 * did not create. */
#ifndef OFFKV_OUTFILE_H
#define OFFKV_OUTFILE_H

#include <stdio.h>

#include "offkv/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct okv_outfile {
    FILE *f;      /* write here */
    char *target; /* the name the data ends under (a symlink's target, resolved) */
    char *tmp;    /* the temporary file, or NULL when writing directly */
} okv_outfile;

/* Opens path for writing as above.  On failure (OKV_ERR_IO naming the path
 * and the system's reason, or OKV_ERR_NOMEM) o holds nothing to release. */
okv_status okv_outfile_open(okv_outfile *o, const char *path, okv_error *err);

/* Flushes, closes and puts the data under its name.  On failure the
 * temporary file is removed, the old file is untouched, and OKV_ERR_IO says
 * why.  Either way o is released. */
okv_status okv_outfile_commit(okv_outfile *o, okv_error *err);

/* Gives up: closes and removes the temporary file (if any) and releases o.
 * Safe on a zeroed okv_outfile. */
void okv_outfile_discard(okv_outfile *o);

#ifdef __cplusplus
}
#endif
#endif
