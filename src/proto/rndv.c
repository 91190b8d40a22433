/* placeholder: being written */
typedef int tmx_placeholder_rndv_t;
