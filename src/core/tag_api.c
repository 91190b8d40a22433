/* placeholder: being written */
typedef int tmx_placeholder_tag_api_t;
