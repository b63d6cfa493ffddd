/* The format verbs of the `grist` CLI: info, cat, get, verify, write. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "grist/format.h"
#include "cli.h"
#include "commands.h"

static int open_files(int argc, char **argv, struct grist_reader **r)
{
	int ret = grist_reader_open((const char *const *)argv, (size_t)argc, NULL, r);

	return ret ? cli_library_error(ret) : 0;
}

/* Collect FILE... arguments, rejecting unknown options; @hex may be NULL when --hex is not allowed. */
static int parse_files(int argc, char **argv, bool *hex, int *first, int *count, const char *usage)
{
	int i;

	*first = 0;
	*count = 0;
	for (i = 1; i < argc; i++) {
		if (cli_is_help(argv[i])) {
			fputs(usage, stdout);
			return -1;
		}
		if (hex && !strcmp(argv[i], "--hex")) {
			*hex = true;
			continue;
		}
		if (!strcmp(argv[i], "--"))
			break;
		if (argv[i][0] == '-' && argv[i][1])
			return cli_usage_error("unknown option '%s'", argv[i]);
		if (!*count)
			*first = i;
		else if (*first + *count != i)
			return cli_usage_error("options must come before the files");
		(*count)++;
	}
	if (!*count)
		return cli_usage_error("no files given");
	return 0;
}

static void print_hex(const uint8_t *p, size_t n)
{
	static const char digits[] = "0123456789abcdef";
	char line[4096];
	size_t i, k = 0;

	for (i = 0; i < n; i++) {
		line[k++] = digits[p[i] >> 4];
		line[k++] = digits[p[i] & 15];
		if (k == sizeof(line)) {
			fwrite(line, 1, k, stdout);
			k = 0;
		}
	}
	line[k++] = '\n';
	fwrite(line, 1, k, stdout);
}

/* Write one record; -EIO once stdout has failed (main() prints why). */
static int emit_record(bool hex, const uint8_t *p, size_t n)
{
	if (hex)
		print_hex(p, n);
	else if (n)
		fwrite(p, 1, n, stdout);
	return cli_stdout_failed() ? -EIO : 0;
}

static const char info_usage[] =
	"usage: grist info FILE...\n\n"
	"Print records, chunks, group size, compression, writer options and size of each file, then totals.\n";

int cmd_info(int argc, char **argv)
{
	struct grist_reader *r;
	struct grist_file_info fi;
	uint64_t chunks = 0, bytes = 0;
	int first, count, ret;
	size_t i;

	ret = parse_files(argc, argv, NULL, &first, &count, info_usage);
	if (ret)
		return ret < 0 ? CLI_EXIT_OK : ret;
	ret = open_files(count, argv + first, &r);
	if (ret)
		return ret;
	for (i = 0; i < grist_reader_num_files(r); i++) {
		grist_reader_file_info(r, i, &fi);
		printf("%s:\n  records: %llu\n  chunks: %llu\n  group size: %llu\n  compression: %s\n"
		       "  writer options: %s\n  file size: %llu\n",
		       fi.path, (unsigned long long)fi.num_records, (unsigned long long)fi.num_chunks,
		       (unsigned long long)fi.group_size, fi.compression,
		       fi.writer_options[0] ? fi.writer_options : "(none)", (unsigned long long)fi.file_size);
		chunks += fi.num_chunks;
		bytes += fi.file_size;
	}
	printf("total:\nfiles: %zu\nrecords: %llu\nchunks: %llu\nbytes: %llu\n", grist_reader_num_files(r),
	       (unsigned long long)grist_reader_num_records(r), (unsigned long long)chunks,
	       (unsigned long long)bytes);
	grist_reader_close(r);
	return CLI_EXIT_OK;
}

static const char cat_usage[] =
	"usage: grist cat [--hex] FILE...\n\n"
	"Write every record in global index order: raw bytes, or with --hex one lowercase hex line per record.\n";

int cmd_cat(int argc, char **argv)
{
	struct grist_reader *r;
	const uint8_t *p;
	bool hex = false;
	int first, count, ret;
	size_t n;

	ret = parse_files(argc, argv, &hex, &first, &count, cat_usage);
	if (ret)
		return ret < 0 ? CLI_EXIT_OK : ret;
	ret = open_files(count, argv + first, &r);
	if (ret)
		return ret;
	while ((ret = grist_reader_read_next(r, &p, &n)) > 0) {
		if (emit_record(hex, p, n) < 0) {
			ret = -EIO; /* reported by cli_finish_stdout() */
			break;
		}
	}
	if (ret < 0 && ret != -EIO)
		ret = cli_library_error(ret);
	else
		ret = ret < 0 ? CLI_EXIT_DATA : CLI_EXIT_OK;
	grist_reader_close(r);
	return ret;
}

static const char get_usage[] =
	"usage: grist get [--hex] FILE... -- INDEX...\n\n"
	"Write the records at the given global indices, in the order given (raw, or --hex lines).\n";

struct get_ctx {
	const uint8_t **data;
	size_t *len;
	uint8_t *store;
	size_t store_len;
};

int cmd_get(int argc, char **argv)
{
	struct grist_reader *r;
	uint64_t *idx = NULL, total;
	bool hex = false;
	int first, count, ret, sep = -1, i, n;
	const uint8_t *p;
	size_t len;

	for (i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--")) {
			sep = i;
			break;
		}
	ret = parse_files(sep < 0 ? argc : sep, argv, &hex, &first, &count, get_usage);
	if (ret)
		return ret < 0 ? CLI_EXIT_OK : ret;
	if (sep < 0 || sep + 1 >= argc)
		return cli_usage_error("no indices given (use FILE... -- INDEX...)");
	n = argc - sep - 1;
	idx = calloc((size_t)n, sizeof(*idx));
	if (!idx)
		return cli_library_error(-ENOMEM);
	for (i = 0; i < n; i++)
		if (!cli_parse_u64(argv[sep + 1 + i], &idx[i])) {
			free(idx);
			return cli_usage_error("bad index '%s'", argv[sep + 1 + i]);
		}
	ret = open_files(count, argv + first, &r);
	if (ret) {
		free(idx);
		return ret;
	}
	total = grist_reader_num_records(r);
	ret = CLI_EXIT_OK;
	for (i = 0; i < n; i++) {
		if (idx[i] >= total) {
			fprintf(stderr, "%s: index %llu is out of range (%llu records)\n", cli_command_name,
				(unsigned long long)idx[i], (unsigned long long)total);
			ret = CLI_EXIT_DATA;
			break;
		}
	}
	/* Records are printed in request order; each read reuses the reader's decoded chunk. */
	for (i = 0; i < n && ret == CLI_EXIT_OK; i++) {
		int err = grist_reader_read(r, idx[i], &p, &len);

		if (err)
			ret = cli_library_error(err);
		else if (emit_record(hex, p, len) < 0)
			ret = CLI_EXIT_DATA;
	}
	grist_reader_close(r);
	free(idx);
	return ret;
}

static const char verify_usage[] =
	"usage: grist verify FILE...\n\n"
	"Check every chunk, block header and hash of each file and cross-check its footer.\n"
	"Prints one summary line per sound file; exit 1 naming the file and byte offset of a problem.\n";

int cmd_verify(int argc, char **argv)
{
	struct grist_verify_report rep;
	int first, count, ret, i, status = CLI_EXIT_OK;

	ret = parse_files(argc, argv, NULL, &first, &count, verify_usage);
	if (ret)
		return ret < 0 ? CLI_EXIT_OK : ret;
	for (i = first; i < first + count; i++) {
		ret = grist_file_verify(argv[i], &rep);
		if (ret) {
			int st = cli_library_error(ret);

			status = st > status ? st : status;
			continue;
		}
		printf("%s: ok: %llu records in %llu data chunks, %llu padding chunks, %llu bytes of records, file %llu bytes\n",
		       argv[i], (unsigned long long)rep.num_records, (unsigned long long)rep.data_chunks,
		       (unsigned long long)rep.padding_chunks, (unsigned long long)rep.decoded_bytes,
		       (unsigned long long)rep.file_size);
	}
	return status;
}

static const char write_usage[] =
	"usage: grist write [--options OPTS] [--hex] OUT\n\n"
	"Write one record per line of stdin (the newline is not part of the record) to OUT.\n"
	"  --options OPTS  writer options, e.g. 'group_size:16,zstd:3' (default: the official defaults)\n"
	"  --hex           each line is the record in hex\n";

static int hex_value(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int cmd_write(int argc, char **argv)
{
	const char *opts = NULL, *out = NULL;
	struct grist_writer *w;
	char *line = NULL;
	size_t cap = 0, lineno = 0;
	bool hex = false;
	ssize_t n;
	int i, ret;

	/* first, before any thread is made: they all inherit the blocked signals */
	cli_cleanup_on_signals();
	for (i = 1; i < argc; i++) {
		if (cli_is_help(argv[i])) {
			fputs(write_usage, stdout);
			return CLI_EXIT_OK;
		} else if (!strcmp(argv[i], "--hex")) {
			hex = true;
		} else if (!strcmp(argv[i], "--options")) {
			if (++i >= argc)
				return cli_usage_error("--options needs a value");
			opts = argv[i];
		} else if (!strncmp(argv[i], "--options=", 10)) {
			opts = argv[i] + 10;
		} else if (argv[i][0] == '-' && argv[i][1]) {
			return cli_usage_error("unknown option '%s'", argv[i]);
		} else if (out) {
			return cli_usage_error("only one output file");
		} else {
			out = argv[i];
		}
	}
	if (!out)
		return cli_usage_error("no output file given");
	ret = grist_writer_open(out, opts, &w);
	if (ret)
		return cli_library_error(ret);
	while ((n = getline(&line, &cap, stdin)) >= 0) {
		size_t len = (size_t)n, j;

		lineno++;
		if (len && line[len - 1] == '\n')
			len--;
		if (hex) {
			if (len % 2) {
				fprintf(stderr, "%s: line %zu: odd number of hex digits\n", cli_command_name, lineno);
				ret = CLI_EXIT_DATA;
				goto fail;
			}
			for (j = 0; j < len / 2; j++) {
				int hi = hex_value((unsigned char)line[2 * j]), lo = hex_value((unsigned char)line[2 * j + 1]);

				if (hi < 0 || lo < 0) {
					fprintf(stderr, "%s: line %zu: not a hex digit at column %zu\n", cli_command_name,
						lineno, 2 * j + (hi < 0 ? 1 : 2));
					ret = CLI_EXIT_DATA;
					goto fail;
				}
				line[j] = (char)(hi << 4 | lo);
			}
			len /= 2;
		}
		ret = grist_writer_write(w, line, len);
		if (ret) {
			ret = cli_library_error(ret);
			goto fail;
		}
	}
	free(line);
	ret = grist_writer_close(w);
	return ret ? cli_library_error(ret) : CLI_EXIT_OK;
fail:
	free(line);
	grist_writer_abort(w);
	return ret;
}
