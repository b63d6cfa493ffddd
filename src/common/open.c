/* Opening an input file that must be a regular file, without blocking on a FIFO or device. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "common/error.h"
#include "common/open.h"

static const char *kind(mode_t m)
{
	if (S_ISFIFO(m))
		return "a FIFO";
	if (S_ISDIR(m))
		return "a directory";
	if (S_ISCHR(m) || S_ISBLK(m))
		return "a device";
	if (S_ISSOCK(m))
		return "a socket";
	return "not a regular file";
}

int grist_open_regular(const char *path, int flags, struct stat *st)
{
	struct stat local;
	int fd, ret, fl;

	if (!st)
		st = &local;
	/* O_NONBLOCK: open() of a FIFO with no writer would otherwise wait forever */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | flags);
	if (fd < 0)
		return grist_fail(-errno, "%s: cannot open: %s", path, strerror(errno));
	if (fstat(fd, st) < 0) {
		ret = grist_fail(-errno, "%s: cannot stat: %s", path, strerror(errno));
		goto fail;
	}
	if (!S_ISREG(st->st_mode)) {
		ret = grist_fail(-EINVAL, "%s: %s, not a regular file; grist reads regular files only", path,
				 kind(st->st_mode));
		goto fail;
	}
	fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0) {
		ret = grist_fail(-errno, "%s: fcntl: %s", path, strerror(errno));
		goto fail;
	}
	return fd;
fail:
	close(fd);
	return ret;
}
