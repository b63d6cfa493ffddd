/* Opening an input file that must be a regular file, without blocking on a FIFO or device. */
#ifndef GRIST_COMMON_OPEN_H
#define GRIST_COMMON_OPEN_H

#include <sys/stat.h>

/*
 * grist_open_regular() - open @path read-only (plus @flags, e.g. O_DIRECT) and check
 * that it is a regular file before anything reads it.
 * @st: filled with its fstat() (may be NULL).
 *
 * The open itself uses O_NONBLOCK, so a FIFO without a writer or a terminal device
 * cannot hang the caller; for a regular file the flag means nothing and is cleared.
 * Return: the descriptor (O_CLOEXEC), or a negative errno with a message naming the
 * path: -EINVAL for a FIFO, socket, device or directory.
 */
int grist_open_regular(const char *path, int flags, struct stat *st);

#endif
