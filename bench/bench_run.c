/* grist-bench's measurement core: datasets made and cached, page cache control, one timed loader run. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "grist/format.h"
#include "bench.h"
#include "cli.h"

double bench_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

size_t bench_median_index(const double *v, unsigned n)
{
	size_t i, j, best = 0;

	for (i = 0; i < n; i++) {
		size_t below = 0, equal_before = 0;

		for (j = 0; j < n; j++) {
			if (v[j] < v[i])
				below++;
			else if (v[j] == v[i] && j < i)
				equal_before++;
		}
		if (below + equal_before == (n - 1) / 2)
			best = i;
	}
	return best;
}

void bench_progress_begin(struct bench_progress *p, bool enabled, const char *label)
{
	p->on = enabled && isatty(STDERR_FILENO);
	p->start = bench_now();
	p->last = 0;
	p->label = label;
}

void bench_progress_update(struct bench_progress *p, double done, double total, double rate, const char *unit)
{
	double now, elapsed, eta;

	if (!p->on)
		return;
	now = bench_now();
	if (now - p->last < 0.2)
		return;
	p->last = now;
	elapsed = now - p->start;
	eta = done > 0 && total > done ? elapsed * (total - done) / done : 0;
	fprintf(stderr, "\r\033[K%s: %.0f %s/s, %.1f s elapsed, ETA %.1f s", p->label, rate, unit, elapsed, eta);
}

void bench_progress_end(struct bench_progress *p)
{
	if (p->on)
		fputs("\r\033[K", stderr);
}

/* Text-like bytes: words of a small vocabulary, so codecs see what they see on real text. */
static void fill_record(uint8_t *buf, size_t len, uint64_t index)
{
	static const char *const words[] = {
		"the", "of", "and", "a", "to", "in", "is", "you", "that", "it", "he", "was", "for", "on",
		"are", "as", "with", "his", "they", "at", "be", "this", "have", "from", "or", "one",
		"had", "by", "word", "but", "not", "what", "all", "were", "we", "when", "your", "can",
		"said", "there", "use", "an", "each", "which", "she", "do", "how", "their", "if", "will",
		"up", "other", "about", "out", "many", "then", "them", "these", "so", "some", "her",
		"would", "make", "like", "record", "shuffle", "batch", "loader", "chunk", "disk",
	};
	const size_t nwords = sizeof(words) / sizeof(words[0]);
	uint64_t s = index * 0x9E3779B97F4A7C15ull + 0xD1B54A32D192ED03ull;
	size_t pos = 0;

	while (pos < len) {
		const char *w;
		size_t wl;

		/* xorshift64*: deterministic per index, no shared state. */
		s ^= s >> 12;
		s ^= s << 25;
		s ^= s >> 27;
		w = words[((s * 0x2545F4914F6CDD1Dull) >> 33) % nwords];
		wl = strlen(w);
		if (wl > len - pos)
			wl = len - pos;
		memcpy(buf + pos, w, wl);
		pos += wl;
		if (pos < len)
			buf[pos++] = (s & 0xF) == 0 ? '\n' : ' ';
	}
}

/* The cache key as a file name: every parameter that changes the bytes, with odd characters made '_'. */
static int dataset_name(const struct bench_data *d, char *path, size_t cap)
{
	char comp[64];
	size_t i;
	int n;

	for (i = 0; d->compression[i] && i + 1 < sizeof(comp); i++) {
		char ch = d->compression[i];

		comp[i] = (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ? ch : '_';
	}
	comp[i] = '\0';
	n = snprintf(path, cap, "%s/bench-n%llu-s%llu-g%llu-%s.array_record", d->dir,
		     (unsigned long long)d->records, (unsigned long long)d->record_size,
		     (unsigned long long)d->group_size, comp);
	return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

/* An intact cached copy opens and holds exactly the records and group size asked for. */
static bool dataset_cached(const struct bench_data *d, const char *path)
{
	struct grist_reader *r = NULL;
	struct grist_file_info info;
	bool ok;

	if (access(path, R_OK))
		return false;
	if (grist_reader_open(&path, 1, NULL, &r))
		return false;
	ok = grist_reader_file_info(r, 0, &info) == 0 && info.num_records == d->records &&
	     (d->records == 0 || info.group_size == d->group_size);
	grist_reader_close(r);
	return ok;
}

int bench_dataset_ensure(const struct bench_data *d, char *path, size_t cap, bool progress)
{
	struct grist_writer *w = NULL;
	struct bench_progress p;
	char options[160];
	uint8_t *rec;
	uint64_t i;
	int ret;

	if (dataset_name(d, path, cap)) {
		fprintf(stderr, "%s: --dir is too long\n", cli_command_name);
		return CLI_EXIT_USAGE;
	}
	if (dataset_cached(d, path))
		return 0;
	if (mkdir(d->dir, 0755) && errno != EEXIST) {
		fprintf(stderr, "%s: cannot create %s: %s\n", cli_command_name, d->dir, strerror(errno));
		return CLI_EXIT_DATA;
	}
	if ((size_t)snprintf(options, sizeof(options), "group_size:%llu,%s", (unsigned long long)d->group_size,
			     d->compression) >= sizeof(options))
		return cli_usage_error("--compression: '%s' is too long", d->compression);
	rec = malloc(d->record_size ? d->record_size : 1);
	if (!rec) {
		fprintf(stderr, "%s: out of memory for a %llu-byte record\n", cli_command_name,
			(unsigned long long)d->record_size);
		return CLI_EXIT_DATA;
	}
	ret = grist_writer_open(path, options, &w);
	if (ret) {
		free(rec);
		return cli_library_error(ret);
	}
	bench_progress_begin(&p, progress, "generating");
	for (i = 0; i < d->records; i++) {
		fill_record(rec, d->record_size, i);
		ret = grist_writer_write(w, rec, d->record_size);
		if (ret) {
			grist_writer_abort(w);
			bench_progress_end(&p);
			free(rec);
			return cli_library_error(ret);
		}
		if ((i & 1023) == 0)
			bench_progress_update(&p, (double)i, (double)d->records,
					      (double)i / (bench_now() - p.start + 1e-9), "records");
	}
	free(rec);
	ret = grist_writer_close(w);
	bench_progress_end(&p);
	if (ret)
		return cli_library_error(ret);
	fprintf(stderr, "%s: generated %s in %.1f s\n", cli_command_name, path, bench_now() - p.start);
	return 0;
}

int bench_warm_file(const char *path)
{
	size_t cap = 1 << 20;
	uint8_t *buf;
	ssize_t n;
	int fd, ret = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	buf = malloc(cap);
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	while ((n = read(fd, buf, cap)) > 0)
		;
	if (n < 0)
		ret = -errno;
	free(buf);
	close(fd);
	return ret;
}

int bench_drop_caches(char *why, size_t cap)
{
	int fd, ret = 0;

	sync();
	fd = open("/proc/sys/vm/drop_caches", O_WRONLY | O_CLOEXEC);
	if (fd < 0) {
		ret = -errno;
		snprintf(why, cap, "cannot open /proc/sys/vm/drop_caches (%s)%s", strerror(errno),
			 geteuid() ? "; run as root to drop the page cache" : "");
		return ret;
	}
	if (write(fd, "3", 1) != 1) {
		ret = -errno;
		snprintf(why, cap, "writing 3 to /proc/sys/vm/drop_caches failed (%s)", strerror(errno));
	}
	close(fd);
	return ret;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Intervals between next() returns, in ns; grows by doubling and stops recording rather than fail. */
struct gaps {
	uint64_t *v;
	size_t n, cap;
};

static void gaps_add(struct gaps *g, uint64_t ns)
{
	if (g->n == g->cap) {
		size_t cap = g->cap ? g->cap * 2 : 4096;
		uint64_t *p;

		if (cap > ((size_t)1 << 26))
			return; /* 64M samples are plenty; the percentiles use what was kept */
		p = realloc(g->v, cap * sizeof(*p));
		if (!p)
			return;
		g->v = p;
		g->cap = cap;
	}
	g->v[g->n++] = ns;
}

static void finish_result(struct bench_result *r, const struct gaps *g, double cpu)
{
	const struct grist_loader_stats *s = &r->stats;
	double wall = r->seconds > 0 ? r->seconds : 1e-9;
	double lanes = wall * (s->threads ? s->threads : 1);

	r->records_per_s = (double)r->records / wall;
	r->batches_per_s = (double)r->batches / wall;
	r->read_bytes_per_s = (double)s->bytes_read / wall;
	r->delivered_bytes_per_s = (double)r->bytes_delivered / wall;
	r->decoded_bytes_per_s = (double)s->bytes_decoded / wall;
	r->cpu_cores = cpu / wall;
	r->consumer_stall_share = (double)s->consumer_stall_ns / 1e9 / wall;
	/* The engine sums these over its worker threads: divide by the lanes they ran on. */
	r->io_wait_share = (double)s->io_wait_ns / 1e9 / lanes;
	r->decode_share = (double)s->decode_ns / 1e9 / lanes;
	r->producer_stall_share = (double)s->producer_stall_ns / 1e9 / lanes;
	if (g->n) {
		qsort(g->v, g->n, sizeof(*g->v), cmp_u64);
		r->batch_p50_s = (double)g->v[g->n / 2] / 1e9;
		r->batch_p99_s = (double)g->v[g->n - 1 - (g->n - 1) / 100] / 1e9;
	} else {
		r->batch_p50_s = r->batch_p99_s = r->first_batch_s;
	}
}

int bench_run_loader(const char *const *paths, size_t num_paths, const struct bench_config *c,
		     struct bench_result *r)
{
	struct grist_loader_config cfg = c->loader;
	struct grist_dataset_spec spec = { .paths = paths, .num_paths = num_paths, .weight = 1.0 };
	struct grist_loader *l = NULL;
	struct bench_progress p;
	struct grist_batch *b;
	struct gaps g = { 0 };
	double t0, cpu0, prev, now, end;
	int ret, rc = 0;

	memset(r, 0, sizeof(*r));
	cfg.datasets = &spec;
	cfg.num_datasets = 1;
	cfg.epochs = 0; /* time- or count-limited: the stream never ends on its own */
	if (c->cold)
		cfg.read_mode = GRIST_READ_DIRECT;
	cpu0 = cli_cpu_seconds();
	t0 = bench_now();
	ret = grist_loader_create(&cfg, &l);
	if (ret)
		return cli_library_error(ret);
	bench_progress_begin(&p, c->progress, "grist");
	end = t0 + c->seconds;
	prev = t0;
	for (;;) {
		rc = cli_loader_next(l, &b);
		if (rc || !b)
			break;
		now = bench_now();
		if (r->batches == 0)
			r->first_batch_s = now - t0;
		else
			gaps_add(&g, (uint64_t)((now - prev) * 1e9));
		prev = now;
		r->batches++;
		r->records += b->num_records;
		r->bytes_delivered += b->bytes;
		grist_loader_release(l, b);
		if (c->batches ? r->batches >= c->batches : now >= end)
			break;
		if (c->batches)
			bench_progress_update(&p, (double)r->batches, (double)c->batches,
					      (double)r->records / (now - t0), "records");
		else
			bench_progress_update(&p, now - t0, c->seconds, (double)r->records / (now - t0), "records");
	}
	r->seconds = prev - t0;
	grist_loader_stats(l, &r->stats);
	finish_result(r, &g, cli_cpu_seconds() - cpu0);
	bench_progress_end(&p);
	grist_loader_destroy(l);
	free(g.v);
	return rc;
}

void bench_print_result_json(FILE *f, const struct bench_result *r)
{
	const struct grist_loader_stats *s = &r->stats;

	fprintf(f,
		"{\"engine\": \"%s\", \"read_mode\": \"%s\", \"threads\": %u, \"seconds\": %.6f, "
		"\"records\": %llu, \"batches\": %llu, \"records_per_s\": %.1f, \"batches_per_s\": %.2f, "
		"\"bytes_read_per_s\": %.1f, \"bytes_delivered_per_s\": %.1f, \"bytes_decoded_per_s\": %.1f, "
		"\"cpu_cores\": %.3f, \"batch_p50_ms\": %.4f, \"batch_p99_ms\": %.4f, \"first_batch_ms\": %.3f, "
		"\"consumer_stall_share\": %.4f, \"io_wait_share\": %.4f, \"decode_share\": %.4f, "
		"\"producer_stall_share\": %.4f, \"reads_issued\": %llu, \"bytes_read\": %llu, "
		"\"bytes_decoded\": %llu, \"memory_bytes\": %llu}",
		s->engine ? s->engine : "?", s->read_mode ? s->read_mode : "?", s->threads, r->seconds,
		(unsigned long long)r->records, (unsigned long long)r->batches, r->records_per_s, r->batches_per_s,
		r->read_bytes_per_s, r->delivered_bytes_per_s, r->decoded_bytes_per_s, r->cpu_cores,
		r->batch_p50_s * 1e3, r->batch_p99_s * 1e3, r->first_batch_s * 1e3, r->consumer_stall_share,
		r->io_wait_share, r->decode_share, r->producer_stall_share, (unsigned long long)s->reads_issued,
		(unsigned long long)s->bytes_read, (unsigned long long)s->bytes_decoded,
		(unsigned long long)s->memory_bytes);
}
