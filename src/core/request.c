/* placeholder: being written */
typedef int tmx_placeholder_request_t;
