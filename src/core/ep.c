/* placeholder: being written */
typedef int tmx_placeholder_ep_t;
