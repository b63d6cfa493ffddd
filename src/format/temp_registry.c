/* What a process that ends must clean up: writer temporaries (walkable from a signal handler); steps to wait for. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/error.h"
#include "format/temp_registry.h"
#include "grist/format.h"
#include "io/upload.h"

/*
 * A signal handler may walk the list at any instruction of any other code, so
 * the list is lock-free and its memory is never freed: entries are pushed at
 * the head and, once released, reused by the next writer. Memory is therefore
 * bounded by the most temporaries ever alive at once (4 KiB each).
 *
 * An entry's state moves FREE -> FILLING (one claimer won the CAS and is
 * copying the path) -> LIVE -> FREE. The handler unlinks LIVE entries only,
 * so it never reads a path being written.
 */
enum { ENTRY_FREE, ENTRY_FILLING, ENTRY_LIVE };

struct grist_temp_entry {
	struct grist_temp_entry *_Atomic next;
	atomic_int state;
	/* a folder of finished files (a TFDS dataset before its rename), not one file */
	atomic_bool folder;
	char path[PATH_MAX];
};

static struct grist_temp_entry *_Atomic list_head;
/* grist_writer_abort_all() ran: no temporary is made and no commit starts any more (under hold_lock) */
static bool closed;
/* guarded steps under way (grist_temp_guard_enter()), which grist_writer_abort_all() lets end first */
static pthread_mutex_t hold_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hold_cv = PTHREAD_COND_INITIALIZER;
static unsigned holds;

static int temp_register(const char *path, bool folder, struct grist_temp_entry **out)
{
	struct grist_temp_entry *e;
	size_t len = strlen(path);

	*out = NULL;
	if (len >= PATH_MAX)
		return grist_fail(-ENAMETOOLONG, "%s: path too long", path);
	for (e = atomic_load(&list_head); e; e = atomic_load(&e->next)) {
		int expect = ENTRY_FREE;

		if (atomic_compare_exchange_strong(&e->state, &expect, ENTRY_FILLING))
			goto fill;
	}
	e = calloc(1, sizeof(*e));
	if (!e)
		return grist_fail(-ENOMEM, "cannot allocate a temporary-file entry");
	atomic_init(&e->state, ENTRY_FILLING);
	{
		struct grist_temp_entry *head = atomic_load(&list_head);

		do
			atomic_store(&e->next, head);
		while (!atomic_compare_exchange_weak(&list_head, &head, e));
	}
fill:
	atomic_store(&e->folder, folder);
	memcpy(e->path, path, len + 1);
	atomic_store(&e->state, ENTRY_LIVE);
	*out = e;
	return 0;
}

int grist_temp_register(const char *path, struct grist_temp_entry **out)
{
	return temp_register(path, false, out);
}

int grist_temp_register_folder(const char *path, struct grist_temp_entry **out)
{
	return temp_register(path, true, out);
}

void grist_temp_release(struct grist_temp_entry *e)
{
	if (e)
		atomic_store(&e->state, ENTRY_FREE);
}

GRIST_API void grist_writer_remove_temporaries(void)
{
	struct grist_temp_entry *e;

	/*
	 * Only async-signal-safe calls here: atomic loads, unlink(2) and rmdir(2). A folder
	 * goes only if empty; emptying it takes opendir(), which grist_writer_abort_all() does.
	 * The newest entries come first, so a file made inside a listed folder goes before it.
	 */
	for (e = atomic_load(&list_head); e; e = atomic_load(&e->next))
		if (atomic_load(&e->state) == ENTRY_LIVE)
			(atomic_load(&e->folder) ? rmdir : unlink)(e->path);
}

/* A listed folder's files (one level: a dataset folder holds no folders while it is made). */
static void empty_folders(void)
{
	struct grist_temp_entry *e;

	for (e = atomic_load(&list_head); e; e = atomic_load(&e->next)) {
		DIR *d;
		struct dirent *de;

		if (atomic_load(&e->state) != ENTRY_LIVE || !atomic_load(&e->folder) || !(d = opendir(e->path)))
			continue;
		while ((de = readdir(d)))
			if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
				unlinkat(dirfd(d), de->d_name, 0);
		closedir(d);
	}
}

int grist_temp_guard_enter(struct grist_temp_guard *g)
{
	sigset_t all;

	pthread_mutex_lock(&hold_lock);
	if (closed) {
		pthread_mutex_unlock(&hold_lock);
		return grist_fail(-ECANCELED, "every writer of this process was aborted (grist_writer_abort_all())");
	}
	holds++;
	pthread_mutex_unlock(&hold_lock);
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &g->old);
	return 0;
}

void grist_temp_guard_leave(struct grist_temp_guard *g)
{
	/* a signal that waited runs its handler here, the step whole behind it */
	pthread_sigmask(SIG_SETMASK, &g->old, NULL);
	pthread_mutex_lock(&hold_lock);
	if (!--holds)
		pthread_cond_broadcast(&hold_cv);
	pthread_mutex_unlock(&hold_lock);
}

GRIST_API int grist_writer_abort_all(unsigned timeout_ms)
{
	/*
	 * A temporary being made is listed first, and a set of shards being renamed into
	 * place appears whole: each such step ends before anything is removed.
	 */
	pthread_mutex_lock(&hold_lock);
	closed = true;
	while (holds)
		pthread_cond_wait(&hold_cv, &hold_lock);
	pthread_mutex_unlock(&hold_lock);
	/* the temporaries first: quick, and done should a second signal end the process meanwhile */
	empty_folders();
	grist_writer_remove_temporaries();
	return grist_upload_abort_all(timeout_ms);
}
