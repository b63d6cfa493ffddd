/* Shared test helpers (see helpers.h). */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "grist/format.h"
#include "helpers.h"

char *t_mkdtemp(void)
{
	const char *base = getenv("TMPDIR");
	char *dir;

	if (asprintf(&dir, "%s/grist-test-XXXXXX", base && *base ? base : "/tmp") < 0)
		return NULL;
	if (!mkdtemp(dir)) {
		free(dir);
		return NULL;
	}
	return dir;
}

void t_rmtree(char *dir)
{
	char *cmd;

	if (!dir)
		return;
	if (asprintf(&cmd, "rm -rf '%s'", dir) >= 0) {
		if (system(cmd) != 0)
			fprintf(stderr, "warning: could not remove %s\n", dir);
		free(cmd);
	}
	free(dir);
}

static char *rotating_buffer(void)
{
	static char bufs[8][4096];
	static unsigned next;

	return bufs[next++ % 8];
}

const char *t_path(const char *dir, const char *name)
{
	char *b = rotating_buffer();

	snprintf(b, 4096, "%s/%s", dir, name);
	return b;
}

const char *t_data(const char *name)
{
	const char *d = getenv("GRIST_TEST_DATA");
	char *b = rotating_buffer();

	snprintf(b, 4096, "%s/%s", d ? d : "tests/data", name);
	return b;
}

unsigned t_count_entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	unsigned n = 0;

	assert_non_null(d);
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			n++;
	closedir(d);
	return n;
}

uint8_t *t_read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	uint8_t *p = NULL;
	long n;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET))
		goto out;
	p = malloc((size_t)n + 1);
	if (p && fread(p, 1, (size_t)n, f) != (size_t)n) {
		free(p);
		p = NULL;
	}
	if (p)
		*len = (size_t)n;
out:
	fclose(f);
	return p;
}

int t_write_file(const char *path, const void *data, size_t len)
{
	FILE *f = fopen(path, "wb");
	int ret = 0;

	if (!f)
		return -1;
	if (len && fwrite(data, 1, len, f) != len)
		ret = -1;
	if (fclose(f))
		ret = -1;
	return ret;
}

int t_run(char **out, const char *fmt, ...)
{
	char *cmd, *buf = NULL;
	size_t len = 0, cap = 0;
	char chunk[4096];
	va_list ap;
	FILE *p;
	size_t n;
	int st;

	va_start(ap, fmt);
	if (vasprintf(&cmd, fmt, ap) < 0) {
		va_end(ap);
		return -1;
	}
	va_end(ap);
	p = popen(cmd, "r");
	free(cmd);
	if (!p)
		return -1;
	while ((n = fread(chunk, 1, sizeof(chunk), p)) > 0) {
		if (len + n + 1 > cap) {
			cap = (len + n + 1) * 2;
			buf = realloc(buf, cap);
			if (!buf)
				abort();
		}
		memcpy(buf + len, chunk, n);
		len += n;
	}
	if (!buf)
		buf = calloc(1, 1);
	buf[len] = '\0';
	st = pclose(p);
	if (out)
		*out = buf;
	else
		free(buf);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

void t_fill(void *p, size_t n, uint64_t seed)
{
	uint8_t *b = p;
	uint64_t x = seed * 0x9E3779B97F4A7C15ULL + 1;
	size_t i;

	for (i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		b[i] = (uint8_t)x;
	}
}

char *t_write_numbered(const char *dir, const char *name, const char *options, int n)
{
	char *path = strdup(t_path(dir, name)), rec[32];
	struct grist_writer *w;
	int i;

	assert_non_null(path);
	assert_int_equal(grist_writer_open(path, options, &w), 0);
	for (i = 0; i < n; i++)
		assert_int_equal(grist_writer_write(w, rec, (size_t)snprintf(rec, sizeof(rec), "record %d", i)), 0);
	assert_int_equal(grist_writer_close(w), 0);
	return path;
}

void t_numbered_make(struct t_numbered *f, const char *name, const char *options, int n)
{
	f->dir = t_mkdtemp();
	f->path = t_write_numbered(f->dir, name, options, n);
}

void t_numbered_drop(struct t_numbered *f)
{
	free(f->path);
	t_rmtree(f->dir);
}

void t_one_file_init(struct t_one_file *o, const char *path)
{
	o->paths[0] = path;
	o->spec = (struct grist_dataset_spec){ .paths = o->paths, .num_paths = 1, .weight = 1 };
	grist_loader_config_init(&o->c);
	o->c.datasets = &o->spec;
	o->c.num_datasets = 1;
}

struct grist_loader *t_one_file_open(const struct t_one_file *o)
{
	struct grist_loader *l = NULL;

	assert_int_equal(grist_loader_create(&o->c, &l), 0);
	return l;
}
