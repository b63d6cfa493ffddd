/* `grist tokenize`: the ids grist/text.h gives for files, as JSON lines, for checking by hand. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grist/text.h"
#include "cli.h"

static const char tokenize_usage[] =
	"usage: grist tokenize --tokenizer FILE [--pattern P] [--lines] [--allowed-special] INPUT...\n\n"
	"Print the token ids of each INPUT file's text as one JSON array per line.\n"
	"  --tokenizer FILE   a SentencePiece model (name ends in .model), a tekken JSON (.json) or a\n"
	"                     tiktoken ranks file\n"
	"  --pattern P        ranks files: the split pattern, gpt2 (default), cl100k, o200k, llama3, tekken,\n"
	"                     or the regex string itself\n"
	"  --lines            one array per line of each INPUT (the newline not included), not per file\n"
	"Exit status: 0 done, 1 a bad tokenizer file or input (invalid UTF-8: the message names the\n"
	"file and byte), 2 usage error.\n";

static int read_all(const char *path, char **out, size_t *len)
{
	FILE *f = fopen(path, "rb");
	size_t cap = 1 << 16, n = 0, got;
	char *buf = malloc(cap);

	if (!f || !buf) {
		int e = errno ? -errno : -ENOMEM;

		free(buf);
		if (f)
			fclose(f);
		fprintf(stderr, "%s: %s: %s\n", cli_command_name, path, strerror(-e));
		return CLI_EXIT_DATA;
	}
	while ((got = fread(buf + n, 1, cap - n, f)) > 0) {
		n += got;
		if (n == cap) {
			char *b = realloc(buf, cap * 2);

			if (!b) {
				free(buf);
				fclose(f);
				return cli_library_error(-ENOMEM);
			}
			buf = b;
			cap *= 2;
		}
	}
	if (ferror(f)) {
		fprintf(stderr, "%s: %s: read error\n", cli_command_name, path);
		free(buf);
		fclose(f);
		return CLI_EXIT_DATA;
	}
	fclose(f);
	*out = buf;
	*len = n;
	return 0;
}

static int print_ids(struct grist_tokenizer_ctx *c, const char *path, size_t line, const char *text, size_t len,
		     unsigned flags)
{
	const int32_t *ids;
	size_t n, i;
	int ret = grist_tokenizer_encode(c, text, len, flags, &ids, &n);

	if (ret) {
		if (line)
			fprintf(stderr, "%s: %s: line %zu: %s\n", cli_command_name, path, line, grist_last_error());
		else
			fprintf(stderr, "%s: %s: %s\n", cli_command_name, path, grist_last_error());
		return CLI_EXIT_DATA;
	}
	putchar('[');
	for (i = 0; i < n; i++)
		printf(i ? ",%d" : "%d", ids[i]);
	fputs("]\n", stdout);
	return 0;
}

int cmd_tokenize(int argc, char **argv)
{
	enum { OPT_TOKENIZER = 1, OPT_PATTERN, OPT_LINES, OPT_ALLOWED, OPT_HELP };
	static const struct option longopts[] = {
		{ "tokenizer", required_argument, NULL, OPT_TOKENIZER },
		{ "pattern", required_argument, NULL, OPT_PATTERN },
		{ "lines", no_argument, NULL, OPT_LINES },
		{ "allowed-special", no_argument, NULL, OPT_ALLOWED },
		{ "help", no_argument, NULL, OPT_HELP },
		{ NULL, 0, NULL, 0 },
	};
	struct grist_tokenizer_options o;
	struct grist_tokenizer *t = NULL;
	struct grist_tokenizer_ctx *c = NULL;
	const char *path = NULL;
	bool lines = false;
	unsigned flags = 0;
	int opt, ret, rc = CLI_EXIT_OK;

	grist_tokenizer_options_init(&o);
	opterr = 0;
	optind = 1;
	while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (opt) {
		case OPT_TOKENIZER:
			path = optarg;
			break;
		case OPT_PATTERN:
			o.pattern = optarg;
			break;
		case OPT_LINES:
			lines = true;
			break;
		case OPT_ALLOWED:
			flags |= GRIST_ENCODE_ALLOW_SPECIAL;
			break;
		case 'h':
		case OPT_HELP:
			fputs(tokenize_usage, stdout);
			return CLI_EXIT_OK;
		default:
			return cli_usage_error("unknown or incomplete option '%s'", argv[optind - 1]);
		}
	}
	if (!path)
		return cli_usage_error("--tokenizer FILE is required");
	if (optind >= argc)
		return cli_usage_error("need at least one INPUT file");
	ret = grist_tokenizer_open(path, &o, &t);
	if (!ret)
		ret = grist_tokenizer_ctx_create(t, &c);
	if (ret) {
		grist_tokenizer_close(t);
		return cli_library_error(ret);
	}
	for (int a = optind; a < argc && rc == CLI_EXIT_OK; a++) {
		char *text = NULL;
		size_t len = 0;

		rc = read_all(argv[a], &text, &len);
		if (rc)
			break;
		if (!lines) {
			rc = print_ids(c, argv[a], 0, text, len, flags);
		} else {
			size_t at = 0, no = 0;

			while (at < len && rc == CLI_EXIT_OK) {
				char *nl = memchr(text + at, '\n', len - at);
				size_t end = nl ? (size_t)(nl - text) : len;

				rc = print_ids(c, argv[a], ++no, text + at, end - at, flags);
				at = end + 1;
			}
		}
		free(text);
	}
	grist_tokenizer_ctx_destroy(c);
	grist_tokenizer_close(t);
	return rc;
}
