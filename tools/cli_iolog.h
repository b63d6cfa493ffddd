/* `grist load --iolog FILE`: record the engine's read requests for fio's --read_iolog. */
#ifndef GRIST_TOOLS_CLI_IOLOG_H
#define GRIST_TOOLS_CLI_IOLOG_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "grist/loader.h"

struct cli_iolog {
	pthread_mutex_t lock;
	char **files;             /* distinct paths, in order of first read */
	uint32_t nfiles;
	struct iolog_read *reads; /* every request, in the order the workers submitted them */
	size_t n, cap;
	bool failed;              /* out of memory while recording */
};

/* Record every read request of the loader made from @c into @g (before grist_loader_create). */
void cli_iolog_attach(struct cli_iolog *g, struct grist_loader_config *c);

/*
 * Write what @g recorded to @path as a fio "version 2" iolog (files added and opened,
 * then one "read OFFSET LENGTH" line per request, then closed), so that
 * `fio --read_iolog=PATH` issues exactly these reads. 0, or a negative errno after a message.
 */
int cli_iolog_write(struct cli_iolog *g, const char *path);

void cli_iolog_free(struct cli_iolog *g);

#endif
