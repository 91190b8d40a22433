/* placeholder: being written */
typedef int tmx_placeholder_job_t;
