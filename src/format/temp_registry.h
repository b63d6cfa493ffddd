/* Every writer's temporary file, listed where a signal handler can remove them all; commits under way. */
#ifndef GRIST_FORMAT_TEMP_REGISTRY_H
#define GRIST_FORMAT_TEMP_REGISTRY_H

#include <stddef.h>

struct grist_temp_entry;

/*
 * grist_temp_register() - list @path as a temporary that
 * grist_writer_remove_temporaries() must unlink until released.
 * Return: 0; -ENAMETOOLONG (path of PATH_MAX bytes or more); -ENOMEM;
 * -ECANCELED once grist_writer_abort_all() ran (the caller removes @path).
 */
int grist_temp_register(const char *path, struct grist_temp_entry **out);

/* Take @e off the list (the file was renamed or removed). NULL is fine. */
void grist_temp_release(struct grist_temp_entry *e);

/*
 * grist_commit_hold() / grist_commit_release() - around a commit that must not be cut in
 * half (a set of shards renamed into place): grist_writer_abort_all() waits for it to end.
 * Return: 0; -ECANCELED once grist_writer_abort_all() ran (nothing is held then).
 */
int grist_commit_hold(void);
void grist_commit_release(void);

#endif
