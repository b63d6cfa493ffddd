/* GZIP inflation on a thread of its own, a few pieces ahead of the reader, so decompression overlaps parsing. */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/thread.h"
#include "convert/input.h"

/*
 * A ring of PIECES buffers of PIECE_SIZE bytes. The thread fills ring[tail %
 * PIECES] with one gzread() and publishes it; the reader copies out of
 * ring[head % PIECES] and hands it back once empty. Invariant (under lock):
 * head <= tail <= head + PIECES. Piece ring[i] belongs to the thread while
 * tail == i's turn to fill and to the reader between publication and return,
 * so the bytes themselves are touched without the lock.
 */
#define PIECES 4
#define PIECE_SIZE (1u << 20)

struct grist_inflater {
	gzFile gz;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cv;        /* either side: a piece moved, or stop/done */
	uint8_t *piece[PIECES];
	size_t len[PIECES];
	uint64_t head, tail;
	size_t head_pos;          /* bytes of ring[head] already copied out (reader only) */
	bool stop, done;
	int err;                  /* 0, or a negative errno once done with an error */
	char msg[200];
	uint64_t disk_offset;     /* compressed bytes consumed, after the last published piece */
};

static void *inflate_main(void *arg)
{
	struct grist_inflater *f = arg;

	pthread_mutex_lock(&f->lock);
	for (;;) {
		unsigned slot;
		int got, zerr = Z_OK;
		z_off_t off;
		const char *m;

		while (!f->stop && f->tail - f->head == PIECES)
			pthread_cond_wait(&f->cv, &f->lock);
		if (f->stop)
			break;
		slot = (unsigned)(f->tail % PIECES);
		pthread_mutex_unlock(&f->lock);
		got = gzread(f->gz, f->piece[slot], PIECE_SIZE);
		m = got > 0 ? NULL : gzerror(f->gz, &zerr);
		off = gzoffset(f->gz);
		pthread_mutex_lock(&f->lock);
		if (off > 0)
			f->disk_offset = (uint64_t)off;
		if (got > 0) {
			f->len[slot] = (size_t)got;
			f->tail++;
		} else {
			/* gzread() ends a cut-off stream like a whole one; only gzerror() tells them apart. */
			if (got < 0 || zerr != Z_OK) {
				f->err = zerr == Z_ERRNO ? -errno : -EBADMSG;
				snprintf(f->msg, sizeof(f->msg), "%s",
					 zerr == Z_BUF_ERROR ? "the compressed stream is truncated" :
					 zerr == Z_ERRNO ? strerror(errno) : m);
				if (!f->err)
					f->err = -EIO;
			}
			f->done = true;
		}
		pthread_cond_broadcast(&f->cv);
		if (f->done)
			break;
	}
	pthread_mutex_unlock(&f->lock);
	return NULL;
}

int grist_inflater_start(gzFile gz, const char *path, struct grist_inflater **out)
{
	struct grist_inflater *f = calloc(1, sizeof(*f));
	int i, ret;

	*out = NULL;
	if (!f)
		goto nomem;
	for (i = 0; i < PIECES; i++) {
		f->piece[i] = malloc(PIECE_SIZE);
		if (!f->piece[i])
			goto nomem;
	}
	f->gz = gz;
	pthread_mutex_init(&f->lock, NULL);
	pthread_cond_init(&f->cv, NULL);
	ret = -grist_thread_start(&f->thread, inflate_main, f);
	if (ret) {
		pthread_cond_destroy(&f->cv);
		pthread_mutex_destroy(&f->lock);
		for (i = 0; i < PIECES; i++)
			free(f->piece[i]);
		free(f);
		return grist_fail(-ret, "%s: cannot start the GZIP thread: %s", path, strerror(ret));
	}
	*out = f;
	return 0;
nomem:
	if (f)
		for (i = 0; i < PIECES; i++)
			free(f->piece[i]);
	free(f);
	return grist_fail(-ENOMEM, "%s: cannot allocate GZIP buffers", path);
}

int64_t grist_inflater_read(struct grist_inflater *f, uint8_t *dst, size_t n, const char **why)
{
	unsigned slot;
	size_t take;

	pthread_mutex_lock(&f->lock);
	while (f->head == f->tail && !f->done)
		pthread_cond_wait(&f->cv, &f->lock);
	if (f->head == f->tail) {
		int err = f->err;

		*why = f->msg;
		pthread_mutex_unlock(&f->lock);
		return err;
	}
	pthread_mutex_unlock(&f->lock);
	slot = (unsigned)(f->head % PIECES);
	take = f->len[slot] - f->head_pos;
	if (take > n)
		take = n;
	memcpy(dst, f->piece[slot] + f->head_pos, take);
	f->head_pos += take;
	if (f->head_pos == f->len[slot]) {
		pthread_mutex_lock(&f->lock);
		f->head++;
		f->head_pos = 0;
		pthread_cond_broadcast(&f->cv);
		pthread_mutex_unlock(&f->lock);
	}
	return (int64_t)take;
}

uint64_t grist_inflater_disk_offset(struct grist_inflater *f)
{
	uint64_t off;

	pthread_mutex_lock(&f->lock);
	off = f->disk_offset;
	pthread_mutex_unlock(&f->lock);
	return off;
}

void grist_inflater_stop(struct grist_inflater *f)
{
	int i;

	if (!f)
		return;
	pthread_mutex_lock(&f->lock);
	f->stop = true;
	pthread_cond_broadcast(&f->cv);
	pthread_mutex_unlock(&f->lock);
	pthread_join(f->thread, NULL);
	gzclose(f->gz);
	pthread_cond_destroy(&f->cv);
	pthread_mutex_destroy(&f->lock);
	for (i = 0; i < PIECES; i++)
		free(f->piece[i]);
	free(f);
}
