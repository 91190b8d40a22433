/* placeholder: being written */
typedef int tmx_placeholder_log_t;
