/* `grist load --iolog`: the engine's read requests, written as a fio version 2 iolog. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_iolog.h"

/*
 * The trace callback runs on the engine's worker threads, concurrently, and fio wants
 * every file announced ("add", "open") before its first read: requests are kept in
 * memory under a lock (16 bytes each) and the log is written once the run is over.
 */
struct iolog_read {
	uint64_t offset;
	uint32_t len;
	uint32_t file;
};

static void iolog_trace(void *ctx, const char *path, uint64_t offset, uint64_t len)
{
	struct cli_iolog *g = ctx;
	uint32_t f;

	pthread_mutex_lock(&g->lock);
	for (f = 0; f < g->nfiles && strcmp(g->files[f], path); f++)
		;
	if (f == g->nfiles) {
		char **files = realloc(g->files, (g->nfiles + 1) * sizeof(*files));
		char *copy = strdup(path);

		if (!files || !copy) {
			if (files)
				g->files = files;
			free(copy);
			g->failed = true;
			goto out;
		}
		g->files = files;
		g->files[g->nfiles++] = copy;
	}
	if (g->n == g->cap) {
		size_t cap = g->cap ? 2 * g->cap : 4096;
		struct iolog_read *reads = realloc(g->reads, cap * sizeof(*reads));

		if (!reads) {
			g->failed = true;
			goto out;
		}
		g->reads = reads;
		g->cap = cap;
	}
	g->reads[g->n++] = (struct iolog_read){ .offset = offset, .len = (uint32_t)len, .file = f };
out:
	pthread_mutex_unlock(&g->lock);
}

void cli_iolog_attach(struct cli_iolog *g, struct grist_loader_config *c)
{
	memset(g, 0, sizeof(*g));
	pthread_mutex_init(&g->lock, NULL);
	c->read_trace = iolog_trace;
	c->read_trace_ctx = g;
}

int cli_iolog_write(struct cli_iolog *g, const char *path)
{
	FILE *fp;
	size_t i;
	uint32_t f;
	int err;

	if (g->failed) {
		fprintf(stderr, "grist load: --iolog: out of memory while recording the reads\n");
		return -ENOMEM;
	}
	fp = fopen(path, "w");
	if (!fp) {
		err = errno;
		fprintf(stderr, "grist load: --iolog: cannot create %s: %s\n", path, strerror(err));
		return -err;
	}
	fputs("fio version 2 iolog\n", fp);
	for (f = 0; f < g->nfiles; f++)
		fprintf(fp, "%s add\n", g->files[f]);
	for (f = 0; f < g->nfiles; f++)
		fprintf(fp, "%s open\n", g->files[f]);
	for (i = 0; i < g->n; i++)
		fprintf(fp, "%s read %llu %u\n", g->files[g->reads[i].file], (unsigned long long)g->reads[i].offset,
			g->reads[i].len);
	for (f = 0; f < g->nfiles; f++)
		fprintf(fp, "%s close\n", g->files[f]);
	err = ferror(fp) ? EIO : 0;
	if (fclose(fp) && !err)
		err = errno;
	if (err) {
		fprintf(stderr, "grist load: --iolog: cannot write %s: %s\n", path, strerror(err));
		return -err;
	}
	return 0;
}

void cli_iolog_free(struct cli_iolog *g)
{
	uint32_t f;

	for (f = 0; f < g->nfiles; f++)
		free(g->files[f]);
	free(g->files);
	free(g->reads);
	pthread_mutex_destroy(&g->lock);
	memset(g, 0, sizeof(*g));
}
