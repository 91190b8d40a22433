/*
 * LD_PRELOAD shim for mr_cache.sh: userfaultfd(2) refused with EPERM, as on a kernel without
 * it or with it forbidden (seccomp, vm.unprivileged_userfaultfd=0 before UFFD_USER_MODE_ONLY).
 * Every other syscall(2) goes through unchanged. tmx calls userfaultfd through syscall(2),
 * which a preloaded library can stand in for.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <sys/syscall.h>

/* the project builds with hidden visibility; this one symbol must be seen */
__attribute__((visibility("default"))) long syscall(long number, ...);

long syscall(long number, ...)
{
    static long (*next)(long, ...);
    long    a[6];
    va_list ap;

#ifdef SYS_userfaultfd
    if (number == SYS_userfaultfd) {
        errno = EPERM;
        return -1;
    }
#endif
    if (next == NULL) {
        next = (long (*)(long, ...))dlsym(RTLD_NEXT, "syscall");
        if (next == NULL) {
            errno = ENOSYS;
            return -1;
        }
    }
    /* as glibc's own syscall(2): six register-sized arguments, whether passed or not */
    va_start(ap, number);
    for (int i = 0; i < 6; i++) {
        a[i] = va_arg(ap, long);
    }
    va_end(ap);
    return next(number, a[0], a[1], a[2], a[3], a[4], a[5]);
}
