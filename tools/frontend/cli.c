/* Helpers shared by the front ends (the `grist` CLI and grist-bench): messages, numbers, loader options. */
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
#include "grist/options.h"
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

int cli_loader_next(struct grist_loader *l, struct grist_batch **b)
{
	int ret = grist_loader_next(l, b);

	return ret ? cli_library_error(ret) : 0;
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
	cli_signals_settle();
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

int cli_loader_option(const char *name, const char *arg, struct grist_loader_config *c)
{
	/* the CLI's flags are table options with a fixed value */
	static const struct {
		const char *flag, *option, *value;
	} flags[] = {
		{ "contiguous-shards", "shard_mode", "contiguous" },
		{ "no-shuffle", "shuffle", "false" },
		{ "no-reshuffle", "same_order", "true" },
		{ "same-order", "same_order", "true" },
		{ "drop-remainder", "drop_remainder", "true" },
	};
	size_t i;

	for (i = 0; i < sizeof(flags) / sizeof(flags[0]); i++) {
		if (!strcmp(name, flags[i].flag)) {
			name = flags[i].option;
			arg = flags[i].value;
			break;
		}
	}
	/* The library's option table parses and bounds every value, with the message Python gives too. */
	if (grist_loader_config_set(c, name, arg ? arg : ""))
		return cli_usage_error("%s", grist_last_error());
	return 0;
}

void cli_print_loader_options(FILE *out)
{
	static const char *const types[] = { "number", "size", "bool", "choice", "text" };
	const struct grist_option *o;
	char range[160];
	size_t i;

	fprintf(out, "The loader's options (the library's table; Python's grist.Loader takes the same names):\n");
	for (i = 0; (o = grist_loader_option_at(i)); i++) {
		if (o->type == GRIST_OPTION_UINT || o->type == GRIST_OPTION_SIZE)
			snprintf(range, sizeof(range), "%s %llu..%llu", types[o->type], (unsigned long long)o->min,
				 (unsigned long long)o->max);
		else if (o->type == GRIST_OPTION_BOOL)
			snprintf(range, sizeof(range), "true or false");
		else
			snprintf(range, sizeof(range), "%s", o->choices);
		fprintf(out, "  %-16s %s%s%s\n  %-16s %s\n", o->name, range, o->default_value[0] ? "; default " : "",
			o->default_value, "", o->help);
	}
}

int cli_loader_option_default(const char *name, struct grist_loader_config *c)
{
	const struct grist_option *o = grist_loader_option_find(name);

	if (!o || grist_loader_config_set(c, name, o->default_value)) {
		fprintf(stderr, "%s: the option table has no number default for %s\n", cli_command_name, name);
		return CLI_EXIT_USAGE;
	}
	return 0;
}

/* {default:NAME} and {range:NAME} of cli_print_help(), written to @out; false for anything else. */
static bool help_field(FILE *out, const char *field, size_t len)
{
	static const char *const kinds[] = { "default:", "range:" };
	const struct grist_option *o;
	char name[64];
	size_t k, n;

	for (k = 0; k < 2; k++) {
		n = strlen(kinds[k]);
		if (len <= n || len - n >= sizeof(name) || strncmp(field, kinds[k], n))
			continue;
		memcpy(name, field + n, len - n);
		name[len - n] = 0;
		o = grist_loader_option_find(name);
		if (!o)
			return false;
		if (k == 0)
			fputs(o->default_value, out);
		else
			fprintf(out, "%llu..%llu", (unsigned long long)o->min, (unsigned long long)o->max);
		return true;
	}
	return false;
}

void cli_print_help(FILE *out, const char *text)
{
	const char *p = text, *open, *close;

	while ((open = strchr(p, '{'))) {
		fwrite(p, 1, (size_t)(open - p), out);
		close = strchr(open, '}');
		if (close && help_field(out, open + 1, (size_t)(close - open - 1))) {
			p = close + 1;
			continue;
		}
		/* a brace of the text itself ({"tokens": ...}): as written, and look on after it */
		fputc('{', out);
		p = open + 1;
	}
	fputs(p, out);
}

bool cli_is_help(const char *arg)
{
	return !strcmp(arg, "-h") || !strcmp(arg, "--help");
}
