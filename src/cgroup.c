#define _GNU_SOURCE
#include "cgroup.h"

#include <fcntl.h>
#include <string.h>
#include <unistd.h>

static char hk_cg_dir[320];
static size_t hk_cg_dirlen;

/* Reads up to cap-1 bytes of a file into buf (NUL-terminated); the length, or -1. */
static long hk_read_file(const char *path, char *buf, size_t cap) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    long n = (long)read(fd, buf, cap - 1);
    close(fd);
    if (n < 0) return -1;
    buf[n] = 0;
    return n;
}

/* The value of file `name` in the cgroup directory: a number, or 0 for "max" or no file. */
static size_t hk_cg_value(const char *name) {
    char path[sizeof hk_cg_dir + 32], buf[64];
    if (hk_cg_dirlen == 0 || hk_cg_dirlen + 1 + strlen(name) >= sizeof path) return 0;
    memcpy(path, hk_cg_dir, hk_cg_dirlen);
    path[hk_cg_dirlen] = '/';
    strcpy(path + hk_cg_dirlen + 1, name);
    if (hk_read_file(path, buf, sizeof buf) <= 0 || buf[0] < '0' || buf[0] > '9') return 0;
    size_t v = 0;
    for (const char *s = buf; *s >= '0' && *s <= '9'; s++) v = v * 10 + (size_t)(*s - '0');
    return v;
}

/* The lower of memory.max and memory.high; 0 when neither is set. */
static size_t hk_cg_limit(void) {
    size_t max = hk_cg_value("memory.max"), high = hk_cg_value("memory.high");
    return max && high ? (max < high ? max : high) : (max ? max : high);
}

size_t hk_cgroup_init(const char *dir) {
    if (dir && *dir) {
        size_t n = strlen(dir);
        if (n >= sizeof hk_cg_dir) return 0;
        memcpy(hk_cg_dir, dir, n + 1);
        hk_cg_dirlen = n;
    } else {
        /* cgroup v2: the line "0::/path" */
        char buf[512];
        if (hk_read_file("/proc/self/cgroup", buf, sizeof buf) <= 0) return 0;
        char *line = buf;
        while (line && strncmp(line, "0::", 3) != 0) {
            line = strchr(line, '\n');
            if (line) line++;
        }
        if (!line) return 0;
        line += 3;
        char *end = strchr(line, '\n');
        if (end) *end = 0;
        static const char root[] = "/sys/fs/cgroup";
        size_t n = strlen(line);
        if (sizeof root - 1 + n >= sizeof hk_cg_dir) return 0;
        memcpy(hk_cg_dir, root, sizeof root - 1);
        memcpy(hk_cg_dir + sizeof root - 1, line, n + 1);
        hk_cg_dirlen = sizeof root - 1 + n;
        while (hk_cg_dirlen > 1 && hk_cg_dir[hk_cg_dirlen - 1] == '/') hk_cg_dir[--hk_cg_dirlen] = 0;
    }
    size_t limit = hk_cg_limit();
    if (!limit) hk_cg_dirlen = 0;
    return limit;
}

size_t hk_cgroup_read(size_t *limit) {
    *limit = hk_cg_dirlen ? hk_cg_limit() : 0;
    return *limit ? hk_cg_value("memory.current") : 0;
}
