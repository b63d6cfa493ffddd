/* Every writer's temporary file, listed where a signal handler can remove them all; the steps an abort waits for. */
#ifndef GRIST_FORMAT_TEMP_REGISTRY_H
#define GRIST_FORMAT_TEMP_REGISTRY_H

#include <signal.h>
#include <stddef.h>

struct grist_temp_entry;

/*
 * grist_temp_register() - list @path as a temporary that
 * grist_writer_remove_temporaries() must unlink until released.
 * Return: 0; -ENAMETOOLONG (path of PATH_MAX bytes or more); -ENOMEM.
 */
int grist_temp_register(const char *path, struct grist_temp_entry **out);

/*
 * grist_temp_register_folder() - list the folder @path, whose files are finished but not yet
 * in place (a dataset folder renamed into place whole): grist_writer_abort_all() empties and
 * removes it; grist_writer_remove_temporaries(), from a handler, removes it only if empty.
 * Return: as grist_temp_register().
 */
int grist_temp_register_folder(const char *path, struct grist_temp_entry **out);

/* Take @e off the list (the file was renamed or removed). NULL is fine. */
void grist_temp_release(struct grist_temp_entry *e);

/*
 * struct grist_temp_guard - held around a step that must not be cut in half: making a
 * temporary and listing it (so no cleanup finds it made but not listed), and renaming
 * finished files into place (so a set of shards, or a dataset's folder, appears whole or
 * not at all). Two cleanups may otherwise fall in the middle, and each half of the guard
 * keeps one of them out:
 * - the abort hold: grist_writer_abort_all() on another thread (the CLI's signal thread,
 *   which lets the process die right after) waits for every guarded step to end;
 * - every signal blocked on this thread: a program's own handler calling the public,
 *   async-signal-safe grist_writer_remove_temporaries() runs only once the step is over.
 *   A handler can neither wait for the hold nor take a lock, so only a mask keeps it out;
 *   the same contract is why the list is lock-free and never freed. (A handler on another
 *   of the program's threads is not kept out; the library's own threads take no signals.)
 */
struct grist_temp_guard {
	sigset_t old; /* the thread's mask before grist_temp_guard_enter() */
};

/*
 * grist_temp_guard_enter() - take the abort hold, then block every signal on this thread.
 * Return: 0; -ECANCELED once grist_writer_abort_all() ran (nothing is held or blocked then).
 */
int grist_temp_guard_enter(struct grist_temp_guard *g);

/* grist_temp_guard_leave() - restore the thread's signal mask, then end the abort hold. */
void grist_temp_guard_leave(struct grist_temp_guard *g);

#endif
