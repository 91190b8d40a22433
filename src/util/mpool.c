/* placeholder: being written */
typedef int tmx_placeholder_mpool_t;
