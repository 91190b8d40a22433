/* placeholder: being written */
typedef int tmx_placeholder_config_t;
