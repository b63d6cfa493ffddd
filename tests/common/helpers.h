/* Helpers every test file shares: temporary folders, file I/O, test data paths. */
#ifndef GRIST_TESTS_HELPERS_H
#define GRIST_TESTS_HELPERS_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "grist/loader.h"

/* A fresh temporary folder under $TMPDIR (or /tmp); removed by t_rmtree(). */
char *t_mkdtemp(void);
/* Remove a folder tree made by t_mkdtemp() and free the path. */
void t_rmtree(char *dir);
/* "<dir>/<name>" in a static rotating buffer (enough for 8 live paths). */
const char *t_path(const char *dir, const char *name);
/* A file under tests/data (GRIST_TEST_DATA), in a static rotating buffer. */
const char *t_data(const char *name);
/* Read a whole file into malloc'd memory; *len gets its size. NULL on failure. */
uint8_t *t_read_file(const char *path, size_t *len);
/* Entries of folder @dir other than "." and "..", hidden ones included (fails the test if it cannot be read). */
unsigned t_count_entries(const char *dir);
/* Write bytes to a file, replacing it. 0 on success. */
int t_write_file(const char *path, const void *data, size_t len);
/* Run a shell command, capture stdout into malloc'd memory; returns the exit status. */
int t_run(char **out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Deterministic test bytes: fill with a xorshift stream keyed by @seed. */
void t_fill(void *p, size_t n, uint64_t seed);

/*
 * Write @n records "record <i>" to "<dir>/<name>" with the writer @options; returns the
 * path (malloc'd, the caller frees it). Fails the test on error.
 */
char *t_write_numbered(const char *dir, const char *name, const char *options, int n);

/* A fresh temporary folder holding one t_write_numbered() file: a test group's fixture. */
struct t_numbered {
	char *dir;
	char *path;
};
void t_numbered_make(struct t_numbered *f, const char *name, const char *options, int n);
/* Remove the folder and free both paths. */
void t_numbered_drop(struct t_numbered *f);

/*
 * A loader config over the one file @path: grist_loader_config_init()'s defaults and a
 * dataset of that file alone, for the test to set what it varies in o->c. o->c points into
 * @o (the path and the dataset), so @o is not copied; grist_loader_create() copies them.
 */
struct t_one_file {
	const char *paths[1];
	struct grist_dataset_spec spec;
	struct grist_loader_config c;
};
void t_one_file_init(struct t_one_file *o, const char *path);
/* grist_loader_create() over o->c; fails the test on error. */
struct grist_loader *t_one_file_open(const struct t_one_file *o);

#endif
