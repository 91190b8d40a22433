/* Logging: one formatted line per message, to stderr or TMX_LOG_FILE. */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "util/log.h"

/* Warn until configured: errors in early setup must still be seen. */
tmx_log_level_t tmx_log_level_current = TMX_LOG_WARN;

static pthread_mutex_t tmx_log_lock       = PTHREAD_MUTEX_INITIALIZER;
static FILE           *tmx_log_stream     = NULL; /* NULL = stderr */
static int             tmx_log_file_tried = 0;

static const char *const tmx_log_level_names[] = {"error", "warn", "info", "debug", "trace"};

/* Copies pattern into buf with every %p replaced by the pid; -1 if it does not fit. */
static int tmx_log_expand_path(const char *pattern, char *buf, size_t len)
{
    size_t pos = 0;
    int    ret = 0;

    buf[0] = '\0';
    for (const char *p = pattern; *p != '\0' && ret == 0; p++) {
        int n;

        if (p[0] == '%' && p[1] == 'p') {
            n = snprintf(buf + pos, len - pos, "%d", (int)getpid());
            p++;
        } else {
            n = snprintf(buf + pos, len - pos, "%c", *p);
        }
        if (n < 0 || (size_t)n >= len - pos) {
            ret = -1;
        } else {
            pos += (size_t)n;
        }
    }
    return ret;
}

static void tmx_log_open_file(const char *pattern)
{
    char  path[512];
    FILE *fp = NULL;

    if (tmx_log_expand_path(pattern, path, sizeof(path)) != 0) {
        fprintf(stderr, "[tmx %d log warn] log file name '%s' too long; logging to stderr\n",
                (int)getpid(), pattern);
        goto out;
    }
    /* Append: several processes given the same name (no %p) must not wipe each other. */
    fp = fopen(path, "a");
    if (fp == NULL) {
        fprintf(stderr, "[tmx %d log warn] cannot open log file '%s': %s; logging to stderr\n",
                (int)getpid(), path, strerror(errno));
        goto out;
    }
    /* Line buffering: a crash must not lose the lines that explain it. */
    setvbuf(fp, NULL, _IOLBF, 0);
    /* Released so that writers on other threads see a fully set up stream. */
    __atomic_store_n(&tmx_log_stream, fp, __ATOMIC_RELEASE);
out:
    return;
}

void tmx_log_configure(const tmx_config_t *cfg)
{
    if (cfg == NULL) {
        goto out;
    }
    pthread_mutex_lock(&tmx_log_lock);
    /* Other threads read the level without a lock (the tmx_log macro); writing only on a
     * change keeps the usual case, every context applying the same configuration, free of
     * a data race. */
    if (cfg->log_level >= TMX_LOG_ERROR && cfg->log_level <= TMX_LOG_TRACE &&
        tmx_log_level_current != (tmx_log_level_t)cfg->log_level) {
        tmx_log_level_current = (tmx_log_level_t)cfg->log_level;
    }
    /* The file is opened once per process; later calls (more contexts) keep it. */
    if (!tmx_log_file_tried && cfg->log_file[0] != '\0') {
        tmx_log_file_tried = 1;
        tmx_log_open_file(cfg->log_file);
    }
    pthread_mutex_unlock(&tmx_log_lock);
out:
    return;
}

static const char *tmx_log_basename(const char *file)
{
    const char *slash = strrchr(file, '/');
    return (slash != NULL) ? slash + 1 : file;
}

void tmx_log_write(tmx_log_level_t level, const char *subsys, const char *file, int line,
                   const char *fmt, ...)
{
    char        msg[1024];
    const char *lname;
    FILE       *stream;
    va_list     ap;
    size_t      len;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    /* Callers may or may not end with a newline; the line gets exactly one. */
    len = strlen(msg);
    while (len > 0 && msg[len - 1] == '\n') {
        msg[--len] = '\0';
    }
    lname  = ((unsigned)level <= TMX_LOG_TRACE) ? tmx_log_level_names[level] : "?";
    stream = __atomic_load_n(&tmx_log_stream, __ATOMIC_ACQUIRE);
    stream = (stream != NULL) ? stream : stderr;
    /* One fprintf per message: stdio locks the stream, so lines of threads do not mix. */
    if (level >= TMX_LOG_DEBUG && file != NULL) {
        fprintf(stream, "[tmx %d %s %s] %s (%s:%d)\n", (int)getpid(),
                (subsys != NULL) ? subsys : "?", lname, msg, tmx_log_basename(file), line);
    } else {
        fprintf(stream, "[tmx %d %s %s] %s\n", (int)getpid(), (subsys != NULL) ? subsys : "?",
                lname, msg);
    }
}
