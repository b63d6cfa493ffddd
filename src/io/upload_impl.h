/*
 * One multipart upload's state, shared by upload.c (the upload) and upload_live.c (every
 * upload of the process, aborted at once when it ends). Nothing else includes it.
 */
#ifndef GRIST_IO_UPLOAD_IMPL_H
#define GRIST_IO_UPLOAD_IMPL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "grist/remote.h"
#include "io/remote.h"
#include "io/s3_sign.h"
#include "io/url.h"

struct part {
	uint8_t *buf;     /* NULL once sent */
	size_t len;
	bool sending;
	unsigned char md5[16];
	char etag[256];
};

struct grist_upload {
	char *url;
	struct grist_url u;
	struct grist_remote_options opt;
	size_t part_bytes;
	char upload_id[1024];   /* "" until CreateMultipartUpload */
	int cancel;             /* atomic: running PUTs stop */
	struct grist_upload *live_prev, *live_next; /* on the live list (under live_lock) */
	bool listed;
	uint64_t total;
	uint8_t *fill;          /* the part being filled */
	size_t fill_len;
	pthread_mutex_t lock;
	pthread_cond_t cv;
	pthread_t *threads;
	unsigned nthreads;
	uint8_t **pool;         /* free part buffers */
	unsigned npool, nbufs;  /* nbufs: allocated, at most upload_inflight + 1 */
	struct part *parts;
	size_t nparts, parts_cap, next; /* next: the first part no thread took yet */
	unsigned busy;          /* parts being sent: taken and not yet put back (under the lock) */
	bool creating;          /* a CreateMultipartUpload is under way (under the lock) */
	bool stop;
	bool finished;          /* grist_upload_finish() ran: no more bytes */
	int error;              /* the failure of the lowest-numbered part that failed */
	size_t error_part;
	char msg[700];
};

/* A request of @u's: its URL, options, @method and @query; nothing else set. */
void grist_upload_request_init(struct grist_upload *u, struct grist_remote_xfer *x, const char *method,
			       const struct grist_sigv4_pair *query, size_t nq);

/* Put @u on the process's list (open). 0, or -ECANCELED once grist_upload_abort_all() ran. */
int grist_upload_live_add(struct grist_upload *u);
/* Take @u off it (free); waits while grist_upload_abort_all() runs. */
void grist_upload_live_remove(struct grist_upload *u);

#endif
