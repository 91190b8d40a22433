/* Logging: levels error..trace, TMX_LOG_LEVEL, TMX_LOG_FILE, a subsystem per file.
 * A file may define TMX_LOG_SUBSYS ("soft", "tag", ...) before including this header. */
#ifndef TMX_UTIL_LOG_H
#define TMX_UTIL_LOG_H

#include "config.h"

#ifndef TMX_LOG_SUBSYS
#define TMX_LOG_SUBSYS "core"
#endif

typedef enum {
    TMX_LOG_ERROR = 0,
    TMX_LOG_WARN  = 1,
    TMX_LOG_INFO  = 2,
    TMX_LOG_DEBUG = 3,
    TMX_LOG_TRACE = 4,
} tmx_log_level_t;

/* Current level; messages above it are not formatted at all. */
extern tmx_log_level_t tmx_log_level_current;

/* Sets level and destination from the loaded configuration (idempotent). */
void tmx_log_configure(const tmx_config_t *cfg);

void tmx_log_write(tmx_log_level_t level, const char *subsys, const char *file, int line,
                   const char *fmt, ...) __attribute__((format(printf, 5, 6)));

#define tmx_log(_lvl, ...)                                                                         \
    do {                                                                                           \
        if ((_lvl) <= tmx_log_level_current) {                                                     \
            tmx_log_write((_lvl), TMX_LOG_SUBSYS, __FILE__, __LINE__, __VA_ARGS__);                \
        }                                                                                          \
    } while (0)

#define tmx_error(...) tmx_log(TMX_LOG_ERROR, __VA_ARGS__)
#define tmx_warn(...)  tmx_log(TMX_LOG_WARN, __VA_ARGS__)
#define tmx_info(...)  tmx_log(TMX_LOG_INFO, __VA_ARGS__)
#define tmx_debug(...) tmx_log(TMX_LOG_DEBUG, __VA_ARGS__)
#ifdef TMX_ENABLE_TRACE
#define tmx_trace(...) tmx_log(TMX_LOG_TRACE, __VA_ARGS__)
#else
#define tmx_trace(...) do { } while (0)
#endif

#endif
