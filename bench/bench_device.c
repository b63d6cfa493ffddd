/* Benchmark of the device stage: per-call OpenCL costs, pageable writes, host->device bytes/s vs a plain pinned write loop, and consumer stall. */
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "grist/device.h"
#include "bench_util.h"

#define REPEATS 5

static const char *spin_src =
	"__kernel void spin(__global const uint *d, uint iters, __global uint *out)\n"
	"{\n"
	"	size_t i = get_global_id(0);\n"
	"	uint x = d[i * 64], k;\n"
	"	for (k = 0; k < iters; k++)\n"
	"		x = x * 1664525u + 1013904223u;\n"
	"	out[i] = x;\n"
	"}\n";

static void die(const char *what, int code)
{
	fprintf(stderr, "bench_device: %s: %d %s: %s\n", what, code, grist_strerror(code), grist_last_error());
	exit(1);
}

#define CL_CHECK(x) do { cl_int e_ = (x); if (e_ != CL_SUCCESS) { \
		fprintf(stderr, "bench_device: %s failed: %d\n", #x, e_); exit(1); } } while (0)

/*
 * Stage throughput: the producer touches one byte per page (a loader would
 * have filled the batch), the consumer waits for each batch's ready event and
 * releases it; slots - 1 batches stay in flight. Returns bytes/s.
 */
static double run_stage(struct grist_device_stage *s, size_t batch, unsigned slots, unsigned nbatches)
{
	struct grist_device_batch held[64];
	unsigned i, head = 0, nheld = 0, k;
	double t0 = bench_now();

	for (i = 0; i < nbatches + slots - 1; i++) {
		if (i < nbatches) {
			unsigned slot;
			size_t off;
			void *host;
			int ret;

			ret = grist_device_stage_acquire(s, &slot, &host);
			if (ret)
				die("acquire", ret);
			for (off = 0; off < batch; off += 4096)
				((volatile char *)host)[off] = (char)i;
			ret = grist_device_stage_submit(s, slot, batch, 1, NULL);
			if (ret)
				die("submit", ret);
			if (grist_device_stage_next(s, &held[(head + nheld) % 64]) != 1)
				die("next", -EIO);
			nheld++;
		}
		/* Keep slots - 1 in flight; the oldest must be on the device before it goes back. */
		if (nheld && (nheld == slots - 1 || i >= nbatches)) {
			const struct grist_device_batch *b = &held[head];

			for (k = 0; k < b->num_parts; k++)
				CL_CHECK(clWaitForEvents(1, &b->parts[k].ready));
			grist_device_stage_release(s, b, 0, NULL);
			head = (head + 1) % 64;
			nheld--;
		}
	}
	return (double)batch * nbatches / (bench_now() - t0);
}

/*
 * The baseline: a pinned buffer and a plain non-blocking clEnqueueWriteBuffer
 * loop over the same sizes. @bounded: wait for write i - (slots - 1) before
 * enqueueing write i, the same in-flight bound and per-batch host wait as the
 * stage loop; otherwise enqueue everything and clFinish once.
 */
static double run_plain(cl_context ctx, cl_device_id dev, size_t batch, unsigned slots, unsigned nbatches,
			bool bounded)
{
	cl_event ev[64] = { 0 };
	cl_command_queue q;
	cl_mem pinned, dst[64];
	void *host;
	unsigned i;
	cl_int err;
	double t0, t;

	q = clCreateCommandQueue(ctx, dev, 0, &err);
	CL_CHECK(err);
	pinned = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, batch, NULL, &err);
	CL_CHECK(err);
	host = clEnqueueMapBuffer(q, pinned, CL_TRUE, CL_MAP_WRITE, 0, batch, 0, NULL, NULL, &err);
	CL_CHECK(err);
	memset(host, 1, batch);
	for (i = 0; i < slots; i++) {
		dst[i] = clCreateBuffer(ctx, CL_MEM_READ_ONLY, batch, NULL, &err);
		CL_CHECK(err);
	}
	CL_CHECK(clFinish(q));
	t0 = bench_now();
	for (i = 0; i < nbatches; i++) {
		cl_event *e = &ev[i % (slots - 1)];

		if (bounded && *e) {
			CL_CHECK(clWaitForEvents(1, e));
			clReleaseEvent(*e);
		}
		CL_CHECK(clEnqueueWriteBuffer(q, dst[i % slots], CL_FALSE, 0, batch, host, 0, NULL,
					      bounded ? e : NULL));
		if (bounded)
			CL_CHECK(clFlush(q));
	}
	CL_CHECK(clFinish(q));
	for (i = 0; bounded && i < slots - 1; i++)
		if (ev[i])
			clReleaseEvent(ev[i]);
	t = bench_now() - t0;
	for (i = 0; i < slots; i++)
		clReleaseMemObject(dst[i]);
	clEnqueueUnmapMemObject(q, pinned, host, 0, NULL, NULL);
	clFinish(q);
	clReleaseMemObject(pinned);
	clReleaseCommandQueue(q);
	return (double)batch * nbatches / t;
}

struct producer {
	struct grist_device_stage *s;
	size_t batch;
	unsigned nbatches;
	double fill_s;		/* time spent writing batches */
};

static void *produce(void *arg)
{
	struct producer *p = arg;
	unsigned i;

	for (i = 0; i < p->nbatches; i++) {
		unsigned slot;
		void *host;
		double t0;
		int ret;

		ret = grist_device_stage_acquire(p->s, &slot, &host);
		if (ret)
			die("acquire", ret);
		t0 = bench_now();
		memset(host, (int)i, p->batch);
		p->fill_s += bench_now() - t0;
		ret = grist_device_stage_submit(p->s, slot, p->batch, p->batch / 4, NULL);
		if (ret)
			die("submit", ret);
	}
	grist_device_stage_close(p->s);
	return NULL;
}

/* One synchronous training step: the spin kernel over the batch, waited for. Returns its seconds. */
static double consume_step(cl_command_queue q, cl_kernel k, const struct grist_device_part *p, cl_mem out,
			   cl_uint iters, double *ready_wait)
{
	size_t global = p->bytes / 256;
	cl_event ev;
	cl_int status;
	double t0 = bench_now();

	CL_CHECK(clGetEventInfo(p->ready, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(status), &status, NULL));
	if (status != CL_COMPLETE) {
		/* The transfer is still running: that is consumer stall. */
		CL_CHECK(clWaitForEvents(1, &p->ready));
		*ready_wait += bench_now() - t0;
	}
	CL_CHECK(clSetKernelArg(k, 0, sizeof(cl_mem), &p->data));
	CL_CHECK(clSetKernelArg(k, 1, sizeof(iters), &iters));
	CL_CHECK(clSetKernelArg(k, 2, sizeof(cl_mem), &out));
	CL_CHECK(clEnqueueNDRangeKernel(q, k, 1, NULL, &global, NULL, 1, &p->ready, &ev));
	CL_CHECK(clWaitForEvents(1, &ev));
	clReleaseEvent(ev);
	return bench_now() - t0;
}

/*
 * A consumer whose kernel costs more than the loader's fill: after warm-up the
 * next batch should always be on the device already, so stall (time in next()
 * plus time waiting for ready events) should be 0.
 */
static void run_stall(const char *selector, enum grist_device_strategy strategy, size_t batch, unsigned slots,
		      double xfer_s)
{
	struct grist_device_config cfg = { .size = sizeof(cfg), .selector = selector, .slots = slots, .slot_bytes = batch,
					   .max_rows = batch / 4, .strategy = strategy };
	const unsigned warmup = 8, nbatches = 72;
	struct grist_device_stats st0, st1;
	struct grist_device_stage *s;
	struct grist_device_batch b;
	struct producer prod;
	cl_command_queue q;
	cl_program prog;
	cl_kernel k;
	cl_mem out;
	cl_uint iters = 16;
	double step = 0, ready_wait = 0, fill_per_batch, t0;
	unsigned i;
	pthread_t t;
	cl_int err;
	int ret;

	ret = grist_device_stage_create(&cfg, &s);
	if (ret)
		die("create", ret);
	prog = clCreateProgramWithSource(grist_device_stage_context(s), 1, &spin_src, NULL, &err);
	CL_CHECK(err);
	CL_CHECK(clBuildProgram(prog, 0, NULL, NULL, NULL, NULL));
	k = clCreateKernel(prog, "spin", &err);
	CL_CHECK(err);
	q = clCreateCommandQueue(grist_device_stage_context(s), grist_device_stage_device(s, 0), 0, &err);
	CL_CHECK(err);
	out = clCreateBuffer(grist_device_stage_context(s), CL_MEM_WRITE_ONLY, batch / 64, NULL, &err);
	CL_CHECK(err);

	/* Calibrate: the consumer step must cost 3x the loader's (fill + transfer) per batch. */
	{
		/* Rotate over more memory than the slots hold, as the producer does: cold stores. */
		char *tmp = malloc((size_t)(slots + 1) * batch);
		struct grist_device_part p = { .bytes = batch };

		if (!tmp)
			die("malloc", -ENOMEM);
		memset(tmp, 0, (size_t)(slots + 1) * batch);	/* first touch out of the timing */
		t0 = bench_now();
		for (i = 0; i < 4 * (slots + 1); i++) {
			memset(tmp + (size_t)(i % (slots + 1)) * batch, (int)i, batch);
			__asm__ volatile("" : : "r"(tmp) : "memory");	/* keep the stores */
		}
		fill_per_batch = (bench_now() - t0) / (4 * (slots + 1));
		free(tmp);
		p.data = clCreateBuffer(grist_device_stage_context(s), CL_MEM_READ_ONLY, batch, NULL, &err);
		CL_CHECK(err);
		p.ready = clCreateUserEvent(grist_device_stage_context(s), &err);
		CL_CHECK(clSetUserEventStatus(p.ready, CL_COMPLETE));
		consume_step(q, k, &p, out, iters, &ready_wait);	/* the first launch compiles */
		while ((step = consume_step(q, k, &p, out, iters, &ready_wait)) < 3 * (fill_per_batch + xfer_s) &&
		       iters < (1u << 30))
			iters *= 2;
		clReleaseEvent(p.ready);
		clReleaseMemObject(p.data);
		ready_wait = 0;
	}

	prod = (struct producer){ .s = s, .batch = batch, .nbatches = nbatches };
	pthread_create(&t, NULL, produce, &prod);
	for (i = 0; (ret = grist_device_stage_next(s, &b)) == 1; i++) {
		if (i == warmup) {
			grist_device_stage_stats(s, &st0);
			ready_wait = 0;
		}
		consume_step(q, k, &b.parts[0], out, iters, &ready_wait);
		grist_device_stage_release(s, &b, 0, NULL);
	}
	if (ret < 0)
		die("next", ret);
	pthread_join(t, NULL);
	grist_device_stage_stats(s, &st1);
	printf("stall %-7s %zu KiB: consumer step %.3f ms, loader %.3f ms fill + %.3f ms transfer; "
	       "after %u warm-up batches: next() wait %.3f ms + ready wait %.3f ms over %u batches\n",
	       grist_device_strategy_name(grist_device_stage_strategy(s)), batch >> 10, step * 1e3,
	       fill_per_batch * 1e3, xfer_s * 1e3, warmup, (double)(st1.consumer_wait_ns - st0.consumer_wait_ns) * 1e-6,
	       ready_wait * 1e3, nbatches - warmup);
	clReleaseMemObject(out);
	clReleaseCommandQueue(q);
	clReleaseKernel(k);
	clReleaseProgram(prog);
	grist_device_stage_destroy(s);
}

/*
 * What each OpenCL call of the stage's per-batch path costs on this driver, one batch
 * of @batch bytes at a time with @depth batches in flight: the data write, the row
 * offsets write, clFlush, the status poll of a finished transfer and the wait for one.
 * Prints the median and 99th percentile of each, in microseconds.
 */
static void run_calls(cl_context ctx, cl_device_id dev, size_t batch, unsigned depth, unsigned n)
{
	double *t[5];
	const char *names[5] = { "write data", "write offsets", "clFlush", "status poll", "wait (done)" };
	cl_event *ev = calloc(depth, sizeof(*ev));
	cl_mem pinned, dst[16], offs[16];
	cl_command_queue q;
	void *host;
	unsigned i, k;
	cl_int err;

	q = clCreateCommandQueue(ctx, dev, 0, &err);
	CL_CHECK(err);
	pinned = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, batch + 4096, NULL, &err);
	CL_CHECK(err);
	host = clEnqueueMapBuffer(q, pinned, CL_TRUE, CL_MAP_WRITE, 0, batch + 4096, 0, NULL, NULL, &err);
	CL_CHECK(err);
	memset(host, 3, batch + 4096);
	for (i = 0; i < 16; i++) {
		dst[i] = clCreateBuffer(ctx, CL_MEM_READ_ONLY, batch, NULL, &err);
		CL_CHECK(err);
		offs[i] = clCreateBuffer(ctx, CL_MEM_READ_ONLY, 4096, NULL, &err);
		CL_CHECK(err);
	}
	for (k = 0; k < 5; k++)
		t[k] = calloc(n, sizeof(double));
	for (i = 0; i < n; i++) {
		cl_event *e = &ev[i % depth], w;
		cl_int status;
		double a, b;

		if (*e) {
			a = bench_now();
			CL_CHECK(clGetEventInfo(*e, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(status), &status, NULL));
			b = bench_now();
			t[3][i] = b - a;
			CL_CHECK(clWaitForEvents(1, e));
			t[4][i] = bench_now() - b;
			clReleaseEvent(*e);
		}
		a = bench_now();
		CL_CHECK(clEnqueueWriteBuffer(q, dst[i % 16], CL_FALSE, 0, batch, host, 0, NULL, &w));
		b = bench_now();
		t[0][i] = b - a;
		CL_CHECK(clEnqueueWriteBuffer(q, offs[i % 16], CL_FALSE, 0, 2056, (char *)host + batch, 0, NULL, e));
		a = bench_now();
		t[1][i] = a - b;
		clReleaseEvent(w);
		CL_CHECK(clFlush(q));
		t[2][i] = bench_now() - a;
	}
	CL_CHECK(clFinish(q));
	printf("calls %zu KiB, %u in flight:", batch >> 10, depth);
	for (k = 0; k < 5; k++) {
		double p99;

		qsort(t[k], n, sizeof(double), bench_cmp_double);
		p99 = t[k][n * 99 / 100];
		printf(" %s %.1f/%.1f us%s", names[k], t[k][n / 2] * 1e6, p99 * 1e6, k < 4 ? "," : "\n");
		free(t[k]);
	}
	for (i = 0; i < depth; i++)
		if (ev[i])
			clReleaseEvent(ev[i]);
	free(ev);
	for (i = 0; i < 16; i++) {
		clReleaseMemObject(dst[i]);
		clReleaseMemObject(offs[i]);
	}
	clEnqueueUnmapMemObject(q, pinned, host, 0, NULL, NULL);
	clFinish(q);
	clReleaseMemObject(pinned);
	clReleaseCommandQueue(q);
}

/*
 * Writes from ordinary (malloc'd, not OpenCL-pinned) memory: bytes/s, and how long the
 * enqueue call itself takes (a driver that stages pageable memory copies it on the
 * calling thread).
 */
static void run_pageable(cl_context ctx, cl_device_id dev, size_t batch, unsigned nbatches)
{
	cl_command_queue q;
	cl_mem dst[8];
	void *host;
	unsigned i;
	cl_int err;
	double t0, in_enqueue = 0, a;

	q = clCreateCommandQueue(ctx, dev, 0, &err);
	CL_CHECK(err);
	if (posix_memalign(&host, 4096, batch))
		die("posix_memalign", -ENOMEM);
	memset(host, 5, batch);
	for (i = 0; i < 8; i++) {
		dst[i] = clCreateBuffer(ctx, CL_MEM_READ_ONLY, batch, NULL, &err);
		CL_CHECK(err);
	}
	CL_CHECK(clEnqueueWriteBuffer(q, dst[0], CL_TRUE, 0, batch, host, 0, NULL, NULL));
	t0 = bench_now();
	for (i = 0; i < nbatches; i++) {
		a = bench_now();
		CL_CHECK(clEnqueueWriteBuffer(q, dst[i % 8], CL_FALSE, 0, batch, host, 0, NULL, NULL));
		in_enqueue += bench_now() - a;
		CL_CHECK(clFlush(q));
	}
	CL_CHECK(clFinish(q));
	printf("pageable write %zu KiB x %u: %.2f GB/s, %.1f us per enqueue call (%.0f%% of the time)\n",
	       batch >> 10, nbatches, (double)batch * nbatches / (bench_now() - t0) * 1e-9,
	       in_enqueue / nbatches * 1e6, 100 * in_enqueue / (bench_now() - t0));
	for (i = 0; i < 8; i++)
		clReleaseMemObject(dst[i]);
	free(host);
	clReleaseCommandQueue(q);
}

int main(int argc, char **argv)
{
	const size_t sizes[] = { 256u << 10, 4u << 20, 32u << 20 };
	const char *selector = argc > 1 ? argv[1] : "0:0";
	const unsigned slots = 3;
	double staged_batch_s = 0, mapped_batch_s = 0;
	unsigned si, r;

	printf("bench_device: selector %s, %u slots, median of %d runs\n", selector, slots, REPEATS);
	{
		/* The per-batch path's calls, timed alone: the floor for what the stage costs per batch. */
		struct grist_device_config cfg = { .size = sizeof(cfg), .selector = selector, .slots = 2, .slot_bytes = 4096, .max_rows = 1 };
		struct grist_device_stage *st;
		int ret = grist_device_stage_create(&cfg, &st);

		if (ret)
			die("create", ret);
		run_calls(grist_device_stage_context(st), grist_device_stage_device(st, 0), 256u << 10, 8, 4000);
		run_calls(grist_device_stage_context(st), grist_device_stage_device(st, 0), 768u << 10, 8, 2000);
		run_pageable(grist_device_stage_context(st), grist_device_stage_device(st, 0), 256u << 10, 4000);
		run_pageable(grist_device_stage_context(st), grist_device_stage_device(st, 0), 768u << 10, 2000);
		run_pageable(grist_device_stage_context(st), grist_device_stage_device(st, 0), 4u << 20, 256);
		grist_device_stage_destroy(st);
	}
	for (si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
		size_t batch = sizes[si];
		unsigned nbatches = (unsigned)((512u << 20) / batch);
		struct grist_device_config cfg = { .size = sizeof(cfg), .selector = selector, .slots = slots, .slot_bytes = batch,
						   .max_rows = 1 };
		double staged[REPEATS], mapped[REPEATS], plain[REPEATS], bounded[REPEATS];
		struct grist_device_stage *st, *mp;
		int ret;

		cfg.strategy = GRIST_DEVICE_STAGING;
		ret = grist_device_stage_create(&cfg, &st);
		if (ret)
			die("create staging", ret);
		cfg.strategy = GRIST_DEVICE_MAPPED;
		ret = grist_device_stage_create(&cfg, &mp);
		if (ret)
			die("create mapped", ret);
		run_stage(st, batch, slots, slots);	/* warm-up: first touch of every buffer */
		run_stage(mp, batch, slots, slots);
		run_plain(grist_device_stage_context(st), grist_device_stage_device(st, 0), batch, slots, slots, false);
		/* Interleaved so drift (turbo, other load) hits all three alike. */
		for (r = 0; r < REPEATS; r++) {
			plain[r] = run_plain(grist_device_stage_context(st), grist_device_stage_device(st, 0), batch,
					     slots, nbatches, false);
			bounded[r] = run_plain(grist_device_stage_context(st), grist_device_stage_device(st, 0),
					       batch, slots, nbatches, true);
			staged[r] = run_stage(st, batch, slots, nbatches);
			mapped[r] = run_stage(mp, batch, slots, nbatches);
		}
		printf("transfer %6zu KiB x %4u: plain pinned write %7.2f GB/s, bounded %7.2f GB/s | "
		       "stage staging %7.2f GB/s, mapped %7.2f GB/s\n", batch >> 10, nbatches,
		       bench_median(plain, REPEATS) * 1e-9, bench_median(bounded, REPEATS) * 1e-9,
		       bench_median(staged, REPEATS) * 1e-9, bench_median(mapped, REPEATS) * 1e-9);
		if (si == 1) {
			staged_batch_s = batch / bench_median(staged, REPEATS);
			mapped_batch_s = batch / bench_median(mapped, REPEATS);
		}
		grist_device_stage_destroy(st);
		grist_device_stage_destroy(mp);
	}
	run_stall(selector, GRIST_DEVICE_STAGING, 4u << 20, slots, staged_batch_s);
	run_stall(selector, GRIST_DEVICE_MAPPED, 4u << 20, slots, mapped_batch_s);
	return 0;
}
