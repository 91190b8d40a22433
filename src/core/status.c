/* placeholder: being written */
typedef int tmx_placeholder_status_t;
