/* Helpers shared by the subcommands of the `grist` CLI. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grist/error.h"
#include "cli.h"

const char *cli_command_name = "grist";

int cli_usage_error(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", cli_command_name);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n(see '%s --help')\n", cli_command_name);
	return CLI_EXIT_USAGE;
}

int cli_library_error(int code)
{
	const char *msg = grist_last_error();

	fprintf(stderr, "%s: %s\n", cli_command_name, msg[0] ? msg : grist_strerror(code));
	return code == -EINVAL ? CLI_EXIT_USAGE : CLI_EXIT_DATA;
}

bool cli_parse_u64(const char *s, uint64_t *out)
{
	unsigned long long v;
	char *end;

	if (!s || !*s || *s < '0' || *s > '9')
		return false;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end)
		return false;
	*out = v;
	return true;
}

bool cli_parse_shard(const char *s, uint64_t *index, uint64_t *count)
{
	const char *slash = strchr(s, '/');
	char head[32];
	size_t n;

	if (!slash)
		return false;
	n = (size_t)(slash - s);
	if (n == 0 || n >= sizeof(head))
		return false;
	memcpy(head, s, n);
	head[n] = '\0';
	if (!cli_parse_u64(head, index) || !cli_parse_u64(slash + 1, count))
		return false;
	return *count >= 1 && *index < *count;
}

bool cli_parse_engine(const char *s, enum grist_engine_kind *out)
{
	if (!strcmp(s, "uring"))
		*out = GRIST_ENGINE_URING;
	else if (!strcmp(s, "pread"))
		*out = GRIST_ENGINE_PREAD;
	else if (!strcmp(s, "ref"))
		*out = GRIST_ENGINE_REF;
	else
		return false;
	return true;
}

bool cli_parse_read_mode(const char *s, enum grist_read_mode *out)
{
	if (!strcmp(s, "auto"))
		*out = GRIST_READ_AUTO;
	else if (!strcmp(s, "direct"))
		*out = GRIST_READ_DIRECT;
	else if (!strcmp(s, "buffered"))
		*out = GRIST_READ_BUFFERED;
	else if (!strcmp(s, "mmap"))
		*out = GRIST_READ_MMAP;
	else
		return false;
	return true;
}

bool cli_parse_granularity(const char *s, enum grist_granularity *out)
{
	if (!strcmp(s, "record"))
		*out = GRIST_GRANULARITY_RECORD;
	else if (!strcmp(s, "chunk"))
		*out = GRIST_GRANULARITY_CHUNK;
	else
		return false;
	return true;
}

bool cli_is_help(const char *arg)
{
	return !strcmp(arg, "-h") || !strcmp(arg, "--help");
}
