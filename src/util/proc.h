#ifndef TMX_UTIL_PROC_H
#define TMX_UTIL_PROC_H

/* /proc/<pid>/stat, shared by the library (the soft device's liveness checks) and tmxrun
 * (which does not link libtmx): header-only for that reason. */

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

/* Reads /proc/<pid>/stat into buf: the text after the command name (from the space before
 * field 3, the state), or NULL when the process is unknown. The command name may hold spaces
 * and parentheses, so it ends at the last ')'. */
static inline const char *tmx_proc_stat(pid_t pid, char *buf, size_t len)
{
    char        path[64];
    const char *p;
    ssize_t     n;
    int         fd;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return NULL;
    }
    n = read(fd, buf, len - 1);
    close(fd);
    if (n <= 0) {
        return NULL;
    }
    buf[n] = '\0';
    p      = strrchr(buf, ')');
    return p != NULL && p[1] == ' ' ? p + 1 : NULL;
}

/* Field number field (3: the state, 4: the parent, 22: the start time; man proc(5)) of what
 * tmx_proc_stat returned, as the text that starts it; NULL when the line is shorter. */
static inline const char *tmx_proc_stat_field(const char *p, int field)
{
    /* p is at the space before field 3 */
    for (int f = 4; f <= field && p != NULL; f++) {
        p = strchr(p + 1, ' ');
    }
    return p != NULL && field >= 3 ? p + 1 : NULL;
}

#endif
