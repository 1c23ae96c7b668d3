#include "offkv/outfile.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"

static void release(okv_outfile *o) {
    free(o->target);
    free(o->tmp);
    o->f = NULL;
    o->target = o->tmp = NULL;
}

/* Opens a new file beside target, named target.offkv-tmp.PID.N, with
 * O_EXCL so it can never be someone else's file.  The mode is the old
 * file's, or 0666 less the umask (open applies it) for a new file. */
static int open_temp(okv_outfile *o, mode_t mode, bool keep_mode) {
    size_t len = strlen(o->target) + 48;
    o->tmp = malloc(len);
    if (!o->tmp) {
        errno = ENOMEM;
        return -1;
    }
    for (int attempt = 0; attempt < 1000; attempt++) {
        snprintf(o->tmp, len, "%s.offkv-tmp.%ld.%d", o->target, (long)getpid(), attempt);
        int fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, keep_mode ? 0600 : 0666);
        if (fd >= 0) {
            if (keep_mode) (void)fchmod(fd, mode & 07777);
            return fd;
        }
        if (errno != EEXIST) break;
    }
    free(o->tmp);
    o->tmp = NULL;
    return -1;
}

static okv_status open_direct(okv_outfile *o, const char *path, okv_error *err) {
    if (!(o->f = fopen(path, "wb")))
        return okv_fail(err, OKV_ERR_IO, "cannot open '%.200s' for writing: %s", path, strerror(errno));
    o->target = strdup(path); /* only to name it in errors; NULL is fine */
    return OKV_OK;
}

okv_status okv_outfile_open(okv_outfile *o, const char *path, okv_error *err) {
    memset(o, 0, sizeof *o);
    if (!path || !path[0]) return okv_fail(err, OKV_ERR_INVALID, "no output file named");
    struct stat st;
    bool exists = stat(path, &st) == 0;
    if (exists && !S_ISREG(st.st_mode)) {
        /* A device or FIFO: the data goes through it; it is not ours to replace. */
        return open_direct(o, path, err);
    }
    struct stat lst;
    if (!exists && lstat(path, &lst) == 0) {
        /* A dangling symlink: writing creates its target, as a shell's > would. */
        return open_direct(o, path, err);
    }
    o->target = exists ? realpath(path, NULL) : strdup(path);
    if (!o->target) {
        okv_status s = errno == ENOMEM ? OKV_ERR_NOMEM : OKV_ERR_IO;
        return okv_fail(err, s, "cannot resolve '%.200s': %s", path, strerror(errno));
    }
    int fd = open_temp(o, st.st_mode, exists);
    if (fd < 0) {
        int e = errno;
        release(o);
        return okv_fail(err, e == ENOMEM ? OKV_ERR_NOMEM : OKV_ERR_IO,
                        "cannot create a file beside '%.200s': %s", path, strerror(e));
    }
    if (!(o->f = fdopen(fd, "wb"))) {
        int e = errno;
        close(fd);
        unlink(o->tmp);
        release(o);
        return okv_fail(err, OKV_ERR_IO, "cannot open '%.200s' for writing: %s", path, strerror(e));
    }
    return OKV_OK;
}

okv_status okv_outfile_commit(okv_outfile *o, okv_error *err) {
    const char *name = o->target ? o->target : "output";
    okv_status st = OKV_OK;
    int e = 0;
    if (fflush(o->f) != 0) e = errno;
    if (fclose(o->f) != 0 && !e) e = errno;
    o->f = NULL;
    if (e) st = okv_fail(err, OKV_ERR_IO, "writing '%.200s': %s", name, strerror(e));
    if (o->tmp) {
        if (!st && rename(o->tmp, o->target) != 0)
            st = okv_fail(err, OKV_ERR_IO, "cannot rename the finished file to '%.200s': %s", o->target,
                          strerror(errno));
        if (st) unlink(o->tmp);
    }
    release(o);
    return st;
}

void okv_outfile_discard(okv_outfile *o) {
    if (o->f) fclose(o->f);
    if (o->tmp) unlink(o->tmp);
    release(o);
}
