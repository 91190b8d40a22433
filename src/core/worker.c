/* placeholder: being written */
typedef int tmx_placeholder_worker_t;
