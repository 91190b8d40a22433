/* placeholder: being written */
typedef int tmx_placeholder_context_t;
