/* Helpers shared by the subcommands of the `grist` CLI. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "grist/error.h"
#include "cli.h"

const char *cli_command_name = "grist";

double cli_seconds_since(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)(t.tv_sec - t0->tv_sec) + (double)(t.tv_nsec - t0->tv_nsec) * 1e-9;
}

double cli_cpu_seconds(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
	       (double)ru.ru_stime.tv_usec / 1e6;
}

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

/* errno of the first failed write to stdout that a command noticed, 0 if none */
static int stdout_errno;

bool cli_stdout_failed(void)
{
	if (!ferror(stdout))
		return false;
	if (!stdout_errno)
		stdout_errno = errno ? errno : EIO;
	return true;
}

int cli_finish_stdout(int rc)
{
	int err = 0;

	/*
	 * Output that cannot be written is an error: a full disk, /dev/full, a closed
	 * descriptor. stdio only reports it on a later write or at the flush, so every
	 * command ends here, whatever it printed.
	 */
	if (cli_stdout_failed())
		err = stdout_errno;
	if (fflush(stdout) == EOF && !err)
		err = errno ? errno : EIO;
	if (fclose(stdout) == EOF && !err)
		err = errno ? errno : EIO;
	if (!err)
		return rc;
	fprintf(stderr, "%s: cannot write standard output: %s\n", cli_command_name, strerror(err));
	return rc ? rc : CLI_EXIT_DATA;
}

/* ---- SIGBUS from a mapped file: only async-signal-safe calls below (open, read, write, _exit) */

static char maps_buf[1 << 20];

static void put_str(const char *s)
{
	ssize_t r = write(STDERR_FILENO, s, strlen(s));

	(void)r;
}

static void put_u64(uint64_t v)
{
	char tmp[24];
	int i = (int)sizeof(tmp);

	tmp[--i] = 0;
	do
		tmp[--i] = (char)('0' + v % 10);
	while (v /= 10);
	put_str(tmp + i);
}

static uint64_t parse_hex(const char **p)
{
	uint64_t v = 0;

	for (;; (*p)++) {
		char c = **p;

		if (c >= '0' && c <= '9')
			v = v << 4 | (uint64_t)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v = v << 4 | (uint64_t)(c - 'a' + 10);
		else
			return v;
	}
}

/* Past the spaces at @p, past one token, past the spaces after it. */
static const char *skip_token(const char *p)
{
	while (*p == ' ')
		p++;
	while (*p && *p != ' ')
		p++;
	while (*p == ' ')
		p++;
	return p;
}

/*
 * The line of /proc/self/maps that holds @addr: its path and the file offset of
 * @addr. Returns the path (inside maps_buf) or NULL.
 */
static const char *mapped_file(uint64_t addr, uint64_t *offset)
{
	size_t len = 0;
	ssize_t n;
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	char *line, *nl;

	if (fd < 0)
		return NULL;
	while (len < sizeof(maps_buf) - 1 && (n = read(fd, maps_buf + len, sizeof(maps_buf) - 1 - len)) > 0)
		len += (size_t)n;
	close(fd);
	maps_buf[len] = 0;
	for (line = maps_buf; line && *line; line = nl ? nl + 1 : NULL) {
		const char *p = line;
		uint64_t lo, hi, off;

		nl = strchr(line, '\n');
		if (nl)
			*nl = 0;
		lo = parse_hex(&p);
		if (*p++ != '-')
			continue;
		hi = parse_hex(&p);
		if (addr < lo || addr >= hi)
			continue;
		/* "lo-hi perms offset dev inode   path" */
		p = skip_token(p); /* perms */
		off = parse_hex(&p);
		p = skip_token(skip_token(p)); /* dev, inode */
		while (*p == ' ')
			p++;
		if (*p != '/')
			return NULL;
		*offset = off + (addr - lo);
		return p;
	}
	return NULL;
}

static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
	uint64_t offset = 0;
	const char *path = mapped_file((uint64_t)(uintptr_t)si->si_addr, &offset);

	(void)sig;
	(void)uc;
	put_str(cli_command_name);
	if (path) {
		put_str(": ");
		put_str(path);
		put_str(": byte ");
		put_u64(offset);
		put_str(": the file cannot be read through its memory map (SIGBUS): it shrank or its "
			"storage failed while mapped (--io mmap needs files that stay as they are)\n");
	} else {
		put_str(": bus error (SIGBUS) outside any mapped file\n");
	}
	_exit(CLI_EXIT_DATA);
}

void cli_install_sigbus(void)
{
	struct sigaction sa = { 0 };

	sa.sa_sigaction = on_sigbus;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGBUS, &sa, NULL);
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

/* A whole number in [@lo, @hi]. */
static bool parse_in(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
	uint64_t v;

	if (!cli_parse_u64(s, &v) || v < lo || v > hi)
		return false;
	*out = v;
	return true;
}

bool cli_parse_layout(const char *s, enum grist_batch_layout *kind, size_t *record_bytes)
{
	uint64_t n;

	if (!strcmp(s, "ragged")) {
		*kind = GRIST_LAYOUT_RAGGED;
		*record_bytes = 0;
		return true;
	}
	if (!strncmp(s, "fixed:", 6) && parse_in(s + 6, 1, 1u << 30, &n))
		*kind = GRIST_LAYOUT_FIXED;
	else if (!strncmp(s, "padded:", 7) && parse_in(s + 7, 1, 1u << 30, &n))
		*kind = GRIST_LAYOUT_PADDED;
	else
		return false;
	*record_bytes = (size_t)n;
	return true;
}

int cli_loader_option(const char *name, const char *arg, struct grist_loader_config *c)
{
	uint64_t v;

	/* Bounds are the loader's own limits, so a bad value is caught here, as a usage error. */
	if (!strcmp(name, "batch-size")) {
		if (!parse_in(arg, 1, 1u << 24, &c->batch_size))
			return cli_usage_error("--batch-size: '%s' is not a number in 1..%u", arg, 1u << 24);
	} else if (!strcmp(name, "seed")) {
		if (!cli_parse_u64(arg, &c->seed))
			return cli_usage_error("--seed: '%s' is not a number", arg);
	} else if (!strcmp(name, "epochs")) {
		if (!cli_parse_u64(arg, &c->epochs))
			return cli_usage_error("--epochs: '%s' is not a number (0 = unbounded)", arg);
	} else if (!strcmp(name, "shard")) {
		if (!cli_parse_shard(arg, &c->shard_index, &c->shard_count))
			return cli_usage_error("--shard: '%s' is not I/K with 0 <= I < K", arg);
	} else if (!strcmp(name, "contiguous-shards")) {
		c->shard_mode = GRIST_SHARD_CONTIGUOUS;
	} else if (!strcmp(name, "no-shuffle")) {
		c->no_shuffle = true;
	} else if (!strcmp(name, "same-order")) {
		c->same_order_each_epoch = true;
	} else if (!strcmp(name, "granularity")) {
		if (!cli_parse_granularity(arg, &c->granularity))
			return cli_usage_error("--granularity: '%s' is not record or chunk", arg);
	} else if (!strcmp(name, "window")) {
		if (!parse_in(arg, 1, UINT64_MAX, &c->window_chunks))
			return cli_usage_error("--window: '%s' is not a number >= 1", arg);
	} else if (!strcmp(name, "layout")) {
		if (!cli_parse_layout(arg, &c->layout, &c->record_bytes))
			return cli_usage_error("--layout: '%s' is not ragged, fixed:N or padded:N with N in 1..%u",
					       arg, 1u << 30);
	} else if (!strcmp(name, "pad-value")) {
		if (!parse_in(arg, 0, 255, &v))
			return cli_usage_error("--pad-value: '%s' is not a number in 0..255", arg);
		c->pad_value = (uint8_t)v;
	} else if (!strcmp(name, "engine")) {
		if (!cli_parse_engine(arg, &c->engine))
			return cli_usage_error("--engine: '%s' is not uring, pread or ref", arg);
	} else if (!strcmp(name, "threads")) {
		if (!parse_in(arg, 1, 256, &v))
			return cli_usage_error("--threads: '%s' is not a number in 1..256", arg);
		c->threads = (unsigned)v;
	} else if (!strcmp(name, "queue-depth")) {
		if (!parse_in(arg, 1, 4096, &v))
			return cli_usage_error("--queue-depth: '%s' is not a number in 1..4096", arg);
		c->queue_depth = (unsigned)v;
	} else if (!strcmp(name, "io")) {
		if (!cli_parse_read_mode(arg, &c->read_mode))
			return cli_usage_error("--io: '%s' is not auto, direct, buffered or mmap", arg);
	} else if (!strcmp(name, "max-batch-bytes")) {
		if (!parse_in(arg, 1, (uint64_t)1 << 40, &v))
			return cli_usage_error("--max-batch-bytes: '%s' is not a number in 1..2^40", arg);
		c->max_batch_bytes = (size_t)v;
	} else if (!strcmp(name, "read-ahead")) {
		if (!parse_in(arg, 4096, (uint64_t)1 << 40, &v))
			return cli_usage_error("--read-ahead: '%s' is not a number of bytes in 4096..2^40", arg);
		c->read_ahead_bytes = (size_t)v;
	} else if (!strcmp(name, "prefetch")) {
		if (!parse_in(arg, 1, 64, &v))
			return cli_usage_error("--prefetch: '%s' is not a number in 1..64", arg);
		c->prefetch = (unsigned)v;
	} else {
		return cli_usage_error("--%s is not a loader option", name);
	}
	return 0;
}

bool cli_is_help(const char *arg)
{
	return !strcmp(arg, "-h") || !strcmp(arg, "--help");
}
