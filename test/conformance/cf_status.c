#include "cf_status.h"

const char *cf_status_enum_name(tmx_status_t s)
{
    switch (s) {
    case TMX_OK:                 return "TMX_OK";
    case TMX_INPROGRESS:         return "TMX_INPROGRESS";
    case TMX_ERR_INVALID_PARAM:  return "TMX_ERR_INVALID_PARAM";
    case TMX_ERR_NO_MEMORY:      return "TMX_ERR_NO_MEMORY";
    case TMX_ERR_NO_RESOURCE:    return "TMX_ERR_NO_RESOURCE";
    case TMX_ERR_UNSUPPORTED:    return "TMX_ERR_UNSUPPORTED";
    case TMX_ERR_TRUNCATED:      return "TMX_ERR_TRUNCATED";
    case TMX_ERR_CANCELED:       return "TMX_ERR_CANCELED";
    case TMX_ERR_NO_DEVICE:      return "TMX_ERR_NO_DEVICE";
    case TMX_ERR_UNREACHABLE:    return "TMX_ERR_UNREACHABLE";
    case TMX_ERR_VERSION:        return "TMX_ERR_VERSION";
    case TMX_ERR_IO:             return "TMX_ERR_IO";
    case TMX_ERR_TIMED_OUT:      return "TMX_ERR_TIMED_OUT";
    case TMX_ERR_BUSY:           return "TMX_ERR_BUSY";
    case TMX_ERR_PEER_FAILED:    return "TMX_ERR_PEER_FAILED";
    case TMX_ERR_INVALID_ADDR:   return "TMX_ERR_INVALID_ADDR";
    case TMX_ERR_NO_MESSAGE:     return "TMX_ERR_NO_MESSAGE";
    case TMX_ERR_INVALID_HANDLE: return "TMX_ERR_INVALID_HANDLE";
    case TMX_ERR_REMOTE_ACCESS:  return "TMX_ERR_REMOTE_ACCESS";
    case TMX_ERR_INTERNAL:       return "TMX_ERR_INTERNAL";
    case TMX_ERR_PEER_FAILED_PENDING: return "TMX_ERR_PEER_FAILED_PENDING";
    }
    return "(unknown status)";
}
