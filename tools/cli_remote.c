/* URLs on the command line: the global --remote OPTS, and s3:// / gs:// globs expanded by listing. */
#include <stdlib.h>
#include <string.h>

#include "grist/remote.h"
#include "cli.h"

/* A URL argument with a glob character that the shell left alone. */
static bool is_url_glob(const char *a)
{
	return (!strncmp(a, "s3://", 5) || !strncmp(a, "gs://", 5)) && strpbrk(a, "*?[");
}

int cli_remote_args(int *argc, char ***argv)
{
	char **in = *argv, **out;
	size_t n = 0, cap = (size_t)*argc + 1;
	int i, ret;

	out = calloc(cap, sizeof(*out));
	if (!out)
		return cli_library_error(-ENOMEM);
	for (i = 0; i < *argc; i++) {
		const char *a = in[i], *opts = NULL;

		if (!strcmp(a, "--remote")) {
			if (i + 1 >= *argc)
				return cli_usage_error("--remote needs OPTS (e.g. timeout_ms:5000,retries:3,inflight:32)");
			opts = in[++i];
		} else if (!strncmp(a, "--remote=", 9)) {
			opts = a + 9;
		}
		if (opts) {
			struct grist_remote_options o;

			/* the one parser of the option text (grist_remote_options_parse), then process-wide */
			grist_remote_get_options(&o);
			ret = grist_remote_options_parse(opts, &o);
			if (!ret)
				ret = grist_remote_set_options(&o);
			if (ret)
				return cli_library_error(ret);
			continue;
		}
		if (i > 0 && is_url_glob(a)) {
			char **urls;
			size_t k, m;

			ret = grist_remote_glob(a, &urls, &m);
			if (ret)
				return cli_library_error(ret);
			if (!m)
				return cli_usage_error("no object matches %s", a);
			cap += m;
			out = realloc(out, cap * sizeof(*out));
			if (!out)
				return cli_library_error(-ENOMEM);
			for (k = 0; k < m; k++)
				out[n++] = urls[k]; /* kept for the process's life, as argv is */
			free(urls);
			continue;
		}
		out[n++] = in[i];
	}
	out[n] = NULL;
	*argc = (int)n;
	*argv = out;
	return 0;
}
