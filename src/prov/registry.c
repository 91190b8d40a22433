/* The static provider table: every provider that was built, in preference order. TMX_PROVIDERS
 * (tmx_config(7)) filters it by name. */
#include "config.h"

#include "prov/prov.h"

extern const tmx_prov_t tmx_soft_prov;
#ifdef HAVE_VERBS
extern const tmx_prov_t tmx_verbs_prov;
#endif

const tmx_prov_t *const tmx_providers[] = {
    &tmx_soft_prov,
#ifdef HAVE_VERBS
    &tmx_verbs_prov,
#endif
    NULL,
};
