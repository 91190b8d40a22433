#include "config.h"

#include <tmx/tmx.h>

TMX_API const char *tmx_status_string(tmx_status_t status)
{
    switch (status) {
    case TMX_OK:                 return "success";
    case TMX_INPROGRESS:         return "operation in progress";
    case TMX_ERR_INVALID_PARAM:  return "invalid parameter";
    case TMX_ERR_NO_MEMORY:      return "out of memory";
    case TMX_ERR_NO_RESOURCE:    return "resource temporarily unavailable";
    case TMX_ERR_UNSUPPORTED:    return "operation not supported";
    case TMX_ERR_TRUNCATED:      return "message truncated";
    case TMX_ERR_CANCELED:       return "request canceled";
    case TMX_ERR_NO_DEVICE:      return "no usable device";
    case TMX_ERR_UNREACHABLE:    return "destination unreachable";
    case TMX_ERR_VERSION:        return "api version mismatch";
    case TMX_ERR_IO:             return "input/output error";
    case TMX_ERR_TIMED_OUT:      return "timed out";
    case TMX_ERR_BUSY:           return "busy";
    case TMX_ERR_PEER_FAILED:    return "peer failed";
    case TMX_ERR_INVALID_ADDR:   return "invalid address";
    case TMX_ERR_NO_MESSAGE:     return "no message";
    case TMX_ERR_INVALID_HANDLE: return "invalid or destroyed handle";
    case TMX_ERR_REMOTE_ACCESS:  return "remote access error";
    case TMX_ERR_INTERNAL:       return "internal error";
    case TMX_ERR_PEER_FAILED_PENDING:
        return "a peer failed; the receive is still posted";
    }
    return "unknown status";
}

TMX_API const char *tmx_version_string(void)
{
    return PACKAGE_VERSION;
}
