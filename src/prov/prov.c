/* placeholder: being written */
typedef int tmx_placeholder_prov_t;
