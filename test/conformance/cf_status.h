/* The enum name of a tmx_status_t, shared by tmx_conformance and tmx_badinput. */
#ifndef TMX_CF_STATUS_H
#define TMX_CF_STATUS_H

#include <tmx/tmx.h>

/* "TMX_ERR_..." for a known status, "(unknown status)" otherwise. */
const char *cf_status_enum_name(tmx_status_t s);

#endif
