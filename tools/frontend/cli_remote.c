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

/* Free what cli_remote_args() built before it failed: the array and the URLs it listed. */
static int give_up(char **out, size_t n, const bool *owned, int rc)
{
	size_t k;

	for (k = 0; k < n; k++)
		if (owned[k])
			free(out[k]);
	free(out);
	free((void *)owned);
	return rc;
}

/*
 * The rewritten argv lives as long as the process, as the real argv does; holding it here
 * keeps it reachable (and the URLs a glob listed through it), so leak checkers such as
 * valgrind's see memory in use rather than a lost block when main() returns.
 */
static char **kept_argv;

int cli_remote_args(int *argc, char ***argv)
{
	char **in = *argv, **out;
	size_t n = 0, cap = (size_t)*argc + 1;
	bool *owned;
	int i, ret;

	out = calloc(cap, sizeof(*out));
	owned = calloc(cap, sizeof(*owned));
	if (!out || !owned) {
		free(out);
		free(owned);
		return cli_library_error(-ENOMEM);
	}
	for (i = 0; i < *argc; i++) {
		const char *a = in[i], *opts = NULL;

		if (!strcmp(a, "--remote")) {
			if (i + 1 >= *argc)
				return give_up(out, n, owned, cli_usage_error("--remote needs OPTS (e.g. "
									    "timeout_ms:5000,retries:3,inflight:32)"));
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
				return give_up(out, n, owned, cli_library_error(ret));
			continue;
		}
		if (i > 0 && is_url_glob(a)) {
			char **urls, **grown;
			bool *grown_owned;
			size_t k, m;

			ret = grist_remote_glob(a, &urls, &m);
			if (ret)
				return give_up(out, n, owned, cli_library_error(ret));
			if (!m) {
				grist_remote_glob_free(urls, m);
				return give_up(out, n, owned, cli_usage_error("no object matches %s", a));
			}
			cap += m;
			grown = realloc(out, cap * sizeof(*out));
			if (grown)
				out = grown;
			grown_owned = grown ? realloc(owned, cap * sizeof(*owned)) : NULL;
			if (!grown_owned) {
				grist_remote_glob_free(urls, m);
				return give_up(out, n, owned, cli_library_error(-ENOMEM));
			}
			owned = grown_owned;
			for (k = 0; k < m; k++) {
				owned[n] = true;
				out[n++] = urls[k]; /* kept for the process's life, as argv is */
			}
			free(urls);
			continue;
		}
		owned[n] = false;
		out[n++] = in[i];
	}
	out[n] = NULL;
	free(owned);
	free(kept_argv); /* a second call (grist-bench's) replaces the first's array */
	kept_argv = out;
	*argc = (int)n;
	*argv = out;
	return 0;
}
