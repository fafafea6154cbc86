#include "cpupool/jobs.h"

#include <string.h>
#include <zstd.h>

#include "cpupool/testjobs.h"
#include "kinds/heavy.h"

uint64_t
lg_jobs_heavy(uint64_t n)
{
	return lg_heavy_loop(n);
}

static enum lg_job_status
run_heavy(struct lg_job *j)
{
	uint64_t x;

	if (j->arg > LG_HEAVY_MAX_ITERATIONS || j->out_cap < sizeof(x))
		return LG_JOB_BAD_INPUT;
	x = lg_jobs_heavy(j->arg);
	memcpy(j->out, &x, sizeof(x));
	j->out_len = sizeof(x);
	return LG_JOB_OK;
}

static enum lg_job_status
run_compress(struct lg_job *j)
{
	/* One context per compute process, reused across jobs: creating it costs more than
	 * compressing a small body. Freed by process exit. */
	static ZSTD_CCtx *cctx;
	size_t n;

	if (j->arg < LG_COMPRESS_MIN_LEVEL || j->arg > LG_COMPRESS_MAX_LEVEL)
		return LG_JOB_BAD_INPUT;
	if (cctx == NULL && (cctx = ZSTD_createCCtx()) == NULL)
		return LG_JOB_ERROR;
	n = ZSTD_compressCCtx(cctx, j->out, j->out_cap, j->in_len ? j->in : (const void *)"",
	    j->in_len, (int)j->arg);
	if (ZSTD_isError(n))
		return LG_JOB_ERROR;
	j->out_len = n;
	return LG_JOB_OK;
}

enum lg_job_status
lg_jobs_run(uint32_t kind, struct lg_job *j)
{
	j->out_len = 0;
	switch (kind) {
	case LG_KIND_HEAVY:
		return run_heavy(j);
	case LG_KIND_COMPRESS:
		return run_compress(j);
	default:
		return LG_JOB_BAD_INPUT;
	}
}

uint64_t
lg_jobs_compress_bound(uint64_t len)
{
	return ZSTD_compressBound((size_t)len);
}

uint64_t
lg_jobs_out_need(uint32_t kind, uint64_t in_len)
{
	return kind == LG_KIND_COMPRESS ? lg_jobs_compress_bound(in_len) : sizeof(uint64_t);
}

const char *
lg_jobs_name(uint32_t kind)
{
	switch (kind) {
	case LG_KIND_HEAVY:
		return "heavy";
	case LG_KIND_COMPRESS:
		return "compress";
	default:
		return lg_testjobs_name(kind);
	}
}
