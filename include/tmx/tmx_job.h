/*
 * tmx_job: what a program started by tmxrun (or alone) needs to find its peers: rank, size,
 * an allgather and a barrier over the launcher's bootstrap channel, and a helper that
 * connects a worker to every rank.
 *
 * Environment set by tmxrun: TMX_RANK, TMX_SIZE, TMX_BOOT_ADDR. Without them the program is a
 * job of one (rank 0, size 1).
 */
#ifndef TMX_TMX_JOB_H
#define TMX_TMX_JOB_H

#include <tmx/tmx.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tmx_job *tmx_job_h;

/** Joins the job (connects to the launcher). Blocks until connected or timed out. */
TMX_API tmx_status_t tmx_job_init(tmx_job_h *job_p);
TMX_API void tmx_job_finalize(tmx_job_h job);

TMX_API int tmx_job_rank(tmx_job_h job);
TMX_API int tmx_job_size(tmx_job_h job);

/** Every rank contributes len bytes; out receives size * len bytes in rank order. */
TMX_API tmx_status_t tmx_job_allgather(tmx_job_h job, const void *in, size_t len, void *out);

TMX_API tmx_status_t tmx_job_barrier(tmx_job_h job);

/** Allgathers the worker's address and creates eps[r] for every rank r (eps[rank] is an
 *  endpoint to the worker itself). eps must hold tmx_job_size() handles. */
TMX_API tmx_status_t tmx_job_connect(tmx_job_h job, tmx_worker_h worker, tmx_ep_h *eps);

#ifdef __cplusplus
}
#endif

#endif /* TMX_TMX_JOB_H */
