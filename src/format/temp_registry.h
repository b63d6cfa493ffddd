/* Every writer's temporary file, listed where a signal handler can remove them all. */
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

/* Take @e off the list (the file was renamed or removed). NULL is fine. */
void grist_temp_release(struct grist_temp_entry *e);

#endif
