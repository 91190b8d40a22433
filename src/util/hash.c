/* placeholder: being written */
typedef int tmx_placeholder_hash_t;
