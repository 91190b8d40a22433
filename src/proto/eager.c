/* placeholder: being written */
typedef int tmx_placeholder_eager_t;
