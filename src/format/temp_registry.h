/* Every writer's temporary file, listed where a signal handler can remove them all; the steps an abort waits for. */
#ifndef GRIST_FORMAT_TEMP_REGISTRY_H
#define GRIST_FORMAT_TEMP_REGISTRY_H

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
 * grist_abort_hold() / grist_abort_release() - around a step that must not be cut in half
 * (making and listing a temporary; renaming a set of shards into place):
 * grist_writer_abort_all(), which the process may die right after, waits for every one
 * to end before it removes anything.
 * Return: 0; -ECANCELED once grist_writer_abort_all() ran (nothing is held then).
 */
int grist_abort_hold(void);
void grist_abort_release(void);

#endif
