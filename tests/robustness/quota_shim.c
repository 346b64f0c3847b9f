/* A spent disk quota, as the kernel reports it (EDQUOT), for the robustness tests: loaded
 * with LD_PRELOAD into makad, it fails every write and allocation of a file below one of
 * the colon-separated folders in MAKAD_TEST_QUOTA_DIRS while the file named by
 * MAKAD_TEST_QUOTA_FLAG exists. SQLite's own writes go through the same calls. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

static int spent(int fd) {
    const char *flag = getenv("MAKAD_TEST_QUOTA_FLAG");
    const char *dirs = getenv("MAKAD_TEST_QUOTA_DIRS");
    struct stat st;
    char link[64], path[PATH_MAX], copy[4096];
    if (flag == NULL || dirs == NULL || stat(flag, &st) != 0) return 0;
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, sizeof path - 1);
    if (n <= 0) return 0;
    path[n] = '\0';
    snprintf(copy, sizeof copy, "%s", dirs);
    for (char *save = NULL, *dir = strtok_r(copy, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
        size_t len = strlen(dir);
        if (len && strncmp(path, dir, len) == 0 && (path[len] == '/' || path[len] == '\0')) return 1;
    }
    return 0;
}

#define NEXT(name) ((__typeof__(&name))dlsym(RTLD_NEXT, #name))

ssize_t write(int fd, const void *buf, size_t count) {
    if (spent(fd)) { errno = EDQUOT; return -1; }
    return NEXT(write)(fd, buf, count);
}

ssize_t pwrite(int fd, const void *buf, size_t count, off_t offset) {
    if (spent(fd)) { errno = EDQUOT; return -1; }
    return NEXT(pwrite)(fd, buf, count, offset);
}

ssize_t pwrite64(int fd, const void *buf, size_t count, off64_t offset) {
    if (spent(fd)) { errno = EDQUOT; return -1; }
    return NEXT(pwrite64)(fd, buf, count, offset);
}

int posix_fallocate(int fd, off_t offset, off_t len) {
    if (spent(fd)) return EDQUOT;
    return NEXT(posix_fallocate)(fd, offset, len);
}

int posix_fallocate64(int fd, off64_t offset, off64_t len) {
    if (spent(fd)) return EDQUOT;
    return NEXT(posix_fallocate64)(fd, offset, len);
}

int fallocate(int fd, int mode, off_t offset, off_t len) {
    if (spent(fd)) { errno = EDQUOT; return -1; }
    return NEXT(fallocate)(fd, mode, offset, len);
}

int fallocate64(int fd, int mode, off64_t offset, off64_t len) {
    if (spent(fd)) { errno = EDQUOT; return -1; }
    return NEXT(fallocate64)(fd, mode, offset, len);
}
