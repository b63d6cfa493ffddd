/* `grist-bench --compare`: fio, a pread loop and the official Python stack on the same file, for as long. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "grist/format.h"
#define GRIST_INTERNAL /* chunk extents from the footer: see grist/internal/chunks.h */
#include "grist/internal/chunks.h"
#include "bench.h"
#include "cli.h"

#ifndef GRIST_BENCH_PY_DIR
#define GRIST_BENCH_PY_DIR ""
#endif
#ifndef GRIST_BENCH_PY_INSTALL_DIR
#define GRIST_BENCH_PY_INSTALL_DIR ""
#endif

const char *const bench_baseline_keys[BENCH_BASELINES] = { "fio", "pread", "official", "grain", "codec",
								      "pyloader" };

/* A child's captured output: stdout whole (bounded), stderr's last line. */
struct child_out {
	char out[1 << 16];
	size_t out_len;
	char err_tail[200];
	int status;        /* exit status, or -1 when it could not start or was killed */
};

/* Keep the last non-empty line of @buf in @tail. */
static void last_line(const char *buf, size_t len, char *tail, size_t cap)
{
	size_t end = len, begin;

	while (end && (buf[end - 1] == '\n' || buf[end - 1] == '\r'))
		end--;
	begin = end;
	while (begin && buf[begin - 1] != '\n')
		begin--;
	if (end - begin >= cap)
		begin = end - (cap - 1);
	memcpy(tail, buf + begin, end - begin);
	tail[end - begin] = '\0';
}

/*
 * Run @argv with stdout and stderr captured, killed after @limit_s seconds.
 * stdout beyond the buffer is read and dropped so the child never blocks on a full pipe.
 */
static void run_child(char *const argv[], double limit_s, struct child_out *co)
{
	char errbuf[4096], drop[4096];
	size_t err_len = 0;
	int out_pipe[2], err_pipe[2], open_fds = 2, wstatus;
	double deadline = bench_now() + limit_s;
	bool killed = false;
	pid_t pid;

	co->out_len = 0;
	co->out[0] = '\0';
	co->err_tail[0] = '\0';
	co->status = -1;
	if (pipe2(out_pipe, O_CLOEXEC))
		goto fail_start;
	if (pipe2(err_pipe, O_CLOEXEC)) {
		close(out_pipe[0]);
		close(out_pipe[1]);
		goto fail_start;
	}
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		close(out_pipe[0]);
		close(out_pipe[1]);
		close(err_pipe[0]);
		close(err_pipe[1]);
		goto fail_start;
	}
	if (pid == 0) {
		int devnull = open("/dev/null", O_RDONLY);

		if (devnull >= 0)
			dup2(devnull, STDIN_FILENO);
		dup2(out_pipe[1], STDOUT_FILENO);
		dup2(err_pipe[1], STDERR_FILENO);
		execvp(argv[0], argv);
		fprintf(stderr, "cannot run %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(out_pipe[1]);
	close(err_pipe[1]);
	struct pollfd pfd[2] = { { .fd = out_pipe[0], .events = POLLIN }, { .fd = err_pipe[0], .events = POLLIN } };

	while (open_fds) {
		double left = deadline - bench_now();
		int n;

		if (left <= 0 && !killed) {
			kill(pid, SIGKILL);
			killed = true;
		}
		n = poll(pfd, 2, left > 0 ? (int)(left * 1000) + 1 : 1000);
		if (n < 0 && errno != EINTR)
			break;
		for (int k = 0; k < 2 && n > 0; k++) {
			ssize_t got;

			if (pfd[k].fd < 0 || !(pfd[k].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			if (k == 0 && co->out_len + 1 < sizeof(co->out))
				got = read(pfd[k].fd, co->out + co->out_len, sizeof(co->out) - 1 - co->out_len);
			else if (k == 1 && err_len < sizeof(errbuf))
				got = read(pfd[k].fd, errbuf + err_len, sizeof(errbuf) - err_len);
			else
				got = read(pfd[k].fd, drop, sizeof(drop));
			if (got <= 0) {
				close(pfd[k].fd);
				pfd[k].fd = -1;
				open_fds--;
				continue;
			}
			if (k == 0 && co->out_len + 1 < sizeof(co->out))
				co->out_len += (size_t)got;
			else if (k == 1 && err_len < sizeof(errbuf)) {
				err_len += (size_t)got;
				if (err_len == sizeof(errbuf)) {
					/* Keep the newest half: the final error line matters most. */
					memmove(errbuf, errbuf + sizeof(errbuf) / 2, sizeof(errbuf) / 2);
					err_len = sizeof(errbuf) / 2;
				}
			}
		}
	}
	for (int k = 0; k < 2; k++)
		if (pfd[k].fd >= 0)
			close(pfd[k].fd);
	co->out[co->out_len] = '\0';
	last_line(errbuf, err_len, co->err_tail, sizeof(co->err_tail));
	if (waitpid(pid, &wstatus, 0) == pid && WIFEXITED(wstatus) && !killed)
		co->status = WEXITSTATUS(wstatus);
	else if (killed)
		snprintf(co->err_tail, sizeof(co->err_tail), "killed after %.0f s", limit_s);
	return;
fail_start:
	snprintf(co->err_tail, sizeof(co->err_tail), "cannot start %s: %s", argv[0], strerror(errno));
}

/* Is @prog on PATH? */
static bool have_program(const char *prog)
{
	const char *path = getenv("PATH");
	char buf[4096];

	while (path && *path) {
		size_t n = strcspn(path, ":");

		if (n && (size_t)snprintf(buf, sizeof(buf), "%.*s/%s", (int)n, path, prog) < sizeof(buf) &&
		    access(buf, X_OK) == 0)
			return true;
		path += n + (path[n] == ':');
	}
	return false;
}

/*
 * A benchmark never installs anything: tools/install-deps (which tools/bench-demo runs)
 * installs fio and gnuplot, so a missing one is a skipped baseline or plot, said so.
 */
bool bench_have_program(const char *prog, const char *pkg, char *why, size_t cap)
{
	if (have_program(prog))
		return true;
	snprintf(why, cap, "%s is not on PATH (the Debian package %s; tools/install-deps installs it)", prog, pkg);
	return false;
}

/* The number after "key" : in @s, searching from @from; -1 when absent. */
static double json_number_after(const char *s, const char *key)
{
	char pat[64];
	const char *p;

	snprintf(pat, sizeof(pat), "\"%s\"", key);
	p = strstr(s, pat);
	if (!p)
		return -1;
	p += strlen(pat);
	while (*p == ' ' || *p == ':' || *p == '\t')
		p++;
	return strtod(p, NULL);
}

/* Chunk geometry of the file: the average extent of a data chunk, and records per chunk. */
static int file_geometry(const char *path, uint64_t *avg_extent, double *records_per_chunk, char *why,
			 size_t cap)
{
	const struct grist_chunk_file *f;
	struct grist_chunk_walker *w;
	struct grist_chunk_extent first, last;
	int ret;

	ret = grist_chunk_walker_open(path, &w);
	if (ret) {
		snprintf(why, cap, "%s", grist_last_error());
		return ret;
	}
	f = grist_chunk_walker_file(w);
	if (!f->num_chunks) {
		snprintf(why, cap, "%s holds no records", path);
		grist_chunk_walker_close(w);
		return -EINVAL;
	}
	grist_chunk_walker_extent(w, 0, &first);
	grist_chunk_walker_extent(w, f->num_chunks - 1, &last);
	*avg_extent = (last.end - first.begin) / f->num_chunks;
	*records_per_chunk = (double)f->num_records / (double)f->num_chunks;
	grist_chunk_walker_close(w);
	return 0;
}

static void baseline_fio(const char *path, const struct bench_config *c, struct bench_baseline *b)
{
	char fname[4200], bs[32], qd[32], rt[32], direct[16], inval[16];
	struct child_out *co;
	uint64_t extent;
	double per_chunk, iops, bw;
	const char *rd;

	b->name = "fio";
	if (!bench_have_program("fio", "fio", b->why, sizeof(b->why)))
		return;
	if (file_geometry(path, &extent, &per_chunk, b->why, sizeof(b->why)))
		return;
	extent = (extent + 4095) & ~(uint64_t)4095;
	co = malloc(sizeof(*co));
	if (!co) {
		snprintf(b->why, sizeof(b->why), "out of memory");
		return;
	}
	/* fio splits --filename at ':'; escape it so any path works. */
	{
		size_t o = 0;

		for (const char *p = path; *p && o + 3 < sizeof(fname); p++) {
			if (*p == ':')
				fname[o++] = '\\';
			fname[o++] = *p;
		}
		fname[o] = '\0';
	}
	snprintf(bs, sizeof(bs), "--bs=%llu", (unsigned long long)extent);
	snprintf(qd, sizeof(qd), "--iodepth=%u", c->loader.queue_depth);
	snprintf(rt, sizeof(rt), "--runtime=%.3f", c->seconds);
	snprintf(direct, sizeof(direct), "--direct=%d", c->cold ? 1 : 0);
	snprintf(inval, sizeof(inval), "--invalidate=%d", c->cold ? 1 : 0);
	char fn_arg[4300];

	snprintf(fn_arg, sizeof(fn_arg), "--filename=%s", fname);
	run_child((char *const[]){ "fio", "--name=grist-baseline", fn_arg, "--ioengine=io_uring", "--rw=randread",
				   bs, qd, rt, "--time_based", direct, inval, "--output-format=json", NULL },
		  c->seconds + 60, co);
	rd = strstr(co->out, "\"read\"");
	if (co->status != 0 || !rd) {
		snprintf(b->why, sizeof(b->why), "fio failed (status %d): %s", co->status, co->err_tail);
		free(co);
		return;
	}
	iops = json_number_after(rd, "iops");
	bw = json_number_after(rd, "bw_bytes");
	free(co);
	if (iops <= 0 || bw <= 0) {
		snprintf(b->why, sizeof(b->why), "fio's JSON output has no read iops/bw_bytes");
		return;
	}
	b->ran = true;
	b->bytes_per_s = bw;
	/* One I/O is one average chunk extent: the records a loader would get from it. */
	b->records_per_s = iops * per_chunk;
	snprintf(b->note, sizeof(b->note),
		 "io_uring randread, bs %llu (average chunk extent rounded up to 4 KiB), iodepth %u, %s; "
		 "records/s = IOPS x %.1f records per chunk",
		 (unsigned long long)extent, c->loader.queue_depth, c->cold ? "direct=1" : "buffered, invalidate=0",
		 per_chunk);
}

static uint64_t xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/*
 * One thread preading random chunk extents, taken from the reader's dataset geometry
 * (no decode): the cost of the reads alone at queue depth 1. Cold runs use O_DIRECT with
 * the extent widened to 4 KiB alignment.
 */
static void baseline_pread(const char *path, const struct bench_config *c, struct bench_baseline *b)
{
	const struct grist_chunk_file *f;
	struct grist_chunk_walker *w = NULL;
	struct grist_chunk_extent e;
	uint64_t s = 0x853C49E6748FEA9Bull ^ c->loader.seed, max_len = 0, chunks = 0, records = 0, bytes = 0;
	uint8_t *buf = NULL;
	double t0, t = 0;
	int fd = -1, ret;

	b->name = "pread loop";
	ret = grist_chunk_walker_open(path, &w);
	if (ret) {
		snprintf(b->why, sizeof(b->why), "%s", grist_last_error());
		return;
	}
	f = grist_chunk_walker_file(w);
	if (!f->num_chunks) {
		snprintf(b->why, sizeof(b->why), "%s holds no records", path);
		goto out;
	}
	for (uint64_t i = 0; i < f->num_chunks; i++)
		if (!grist_chunk_walker_extent(w, i, &e) && e.end - e.begin > max_len)
			max_len = e.end - e.begin;
	if (max_len > ((uint64_t)1 << 30)) {
		snprintf(b->why, sizeof(b->why), "a chunk of %llu bytes is larger than the loop's 1 GiB limit",
			 (unsigned long long)max_len);
		goto out;
	}
	max_len = ((max_len + 4095) & ~(uint64_t)4095) + 4096;
	fd = open(path, O_RDONLY | O_CLOEXEC | (c->cold ? O_DIRECT : 0));
	if (fd < 0 || posix_memalign((void **)&buf, 4096, max_len)) {
		snprintf(b->why, sizeof(b->why), "cannot open %s%s: %s", path, c->cold ? " with O_DIRECT" : "",
			 strerror(errno));
		buf = NULL;
		goto out;
	}
	t0 = bench_now();
	do {
		uint64_t k = xorshift(&s) % f->num_chunks, begin, end;
		ssize_t got;

		grist_chunk_walker_extent(w, k, &e);
		begin = e.begin;
		end = e.end;
		if (c->cold) {
			begin &= ~(uint64_t)4095;
			end = (end + 4095) & ~(uint64_t)4095;
		}
		got = pread(fd, buf, end - begin, (off_t)begin);
		if (got < 0 || (!c->cold && (uint64_t)got != end - begin)) {
			snprintf(b->why, sizeof(b->why), "pread of %llu bytes at %llu failed: %s",
				 (unsigned long long)(end - begin), (unsigned long long)begin,
				 got < 0 ? strerror(errno) : "short read");
			goto out;
		}
		chunks++;
		bytes += (uint64_t)got;
		records += e.num_records;
		if ((chunks & 63) == 0)
			t = bench_now() - t0;
	} while (t < c->seconds);
	b->ran = true;
	b->records_per_s = (double)records / t;
	b->bytes_per_s = (double)bytes / t;
	snprintf(b->note, sizeof(b->note),
		 "one thread, pread of random chunk extents from the footer's geometry, no decode, %s",
		 c->cold ? "O_DIRECT" : "buffered");
out:
	if (fd >= 0)
		close(fd);
	free(buf);
	grist_chunk_walker_close(w);
}

/* The folder holding official_read.py: $GRIST_BENCH_PY, the source tree, then the installed copy. */
static bool find_py_dir(char *dir, size_t cap)
{
	const char *cands[] = { getenv("GRIST_BENCH_PY"), GRIST_BENCH_PY_DIR, GRIST_BENCH_PY_INSTALL_DIR };
	char probe[4200];

	for (size_t i = 0; i < sizeof(cands) / sizeof(cands[0]); i++) {
		if (!cands[i] || !*cands[i])
			continue;
		snprintf(probe, sizeof(probe), "%s/official_read.py", cands[i]);
		if (access(probe, R_OK) == 0) {
			snprintf(dir, cap, "%s", cands[i]);
			return true;
		}
	}
	return false;
}

/* python3 can import the official packages (tools/install-deps installs them; the bench installs nothing). */
static bool have_python_packages(char *why, size_t cap)
{
	static char *const probe[] = { "python3", "-c", "import array_record.python.array_record_module, grain",
				       NULL };
	struct child_out *co = malloc(sizeof(*co));
	bool ok = false;

	if (!co) {
		snprintf(why, cap, "out of memory");
		return false;
	}
	if (!have_program("python3")) {
		snprintf(why, cap, "python3 is not on PATH");
		goto out;
	}
	run_child(probe, 120, co);
	ok = co->status == 0;
	if (!ok)
		snprintf(why, cap, "array_record/grain not importable (pip install array-record grain, or "
			 "tools/install-deps): %.150s", co->err_tail);
out:
	free(co);
	return ok;
}

/* Run bench/py/@script on @path for c->seconds; @extra: more arguments (NULL-terminated), or NULL. */
static void baseline_python(const char *script, const char *name, const char *note, const char *py_dir,
			    const char *path, const struct bench_config *c, char *const *extra,
			    struct bench_baseline *b)
{
	char script_path[4200], batch[32], seed[32], secs[32];
	char *argv[32];
	struct child_out *co;
	size_t n = 0;
	double rate;

	b->name = name;
	snprintf(script_path, sizeof(script_path), "%s/%s", py_dir, script);
	snprintf(batch, sizeof(batch), "%llu", (unsigned long long)c->loader.batch_size);
	snprintf(seed, sizeof(seed), "%llu", (unsigned long long)c->loader.seed);
	snprintf(secs, sizeof(secs), "%.3f", c->seconds);
	co = malloc(sizeof(*co));
	if (!co) {
		snprintf(b->why, sizeof(b->why), "out of memory");
		return;
	}
	/* Imports and index shuffles take a while before the timed part starts: allow for them. */
	for (char *const *a = (char *const[]){ "python3", script_path, (char *)path, "--batch", batch, "--seed", seed,
					       "--seconds", secs, NULL };
	     *a; a++)
		argv[n++] = *a;
	if (c->cold)
		argv[n++] = "--cold";
	for (; extra && *extra && n < 31; extra++)
		argv[n++] = *extra;
	argv[n] = NULL;
	run_child(argv, c->seconds * 3 + 120, co);
	rate = json_number_after(co->out, "records_per_s");
	if (co->status != 0 || rate <= 0) {
		snprintf(b->why, sizeof(b->why), "%s failed (status %d): %s", script, co->status, co->err_tail);
		free(co);
		return;
	}
	free(co);
	b->ran = true;
	b->records_per_s = rate;
	snprintf(b->note, sizeof(b->note), "%s", note);
}

/* Is baseline @i selected? Else it is marked skipped under @name. */
static bool wanted(const struct bench_config *c, struct bench_baseline *out, size_t i, const char *name)
{
	out[i].name = name;
	out[i].skipped = !(c->baselines & (1u << i));
	return !out[i].skipped;
}

/* Announce the baseline about to run on the progress line; cold runs drop the cache first. */
static void begin_baseline(const struct bench_config *c, const struct bench_progress *p, const char *what)
{
	char why[256];

	if (p->on)
		fprintf(stderr, "\r\033[Kbaselines: %s, %.0f s", what, c->seconds);
	/* Cold baselines start from a dropped cache too, like the grist run did. */
	if (c->cold)
		bench_drop_caches(why, sizeof(why));
}

/* The official reader and the Grain pipeline, as selected; both need python3 and the packages. */
static void python_baselines(const char *path, const struct bench_config *c, const struct bench_progress *p,
			     bool official, bool grain, struct bench_baseline out[BENCH_BASELINES])
{
	char py_dir[4096], why[256];

	bool found = find_py_dir(py_dir, sizeof(py_dir));

	if (!found)
		snprintf(why, sizeof(why), "bench/py/official_read.py not found (set GRIST_BENCH_PY to its folder)");
	if (!found || !have_python_packages(why, sizeof(why))) {
		snprintf(out[2].why, sizeof(out[2].why), "%s", why);
		snprintf(out[3].why, sizeof(out[3].why), "%s", why);
		return;
	}
	if (c->cold)
		fprintf(stderr, "%s: note: the Python baselines read through the page cache even with --cold\n",
			cli_command_name);
	if (official) {
		begin_baseline(c, p, "official ArrayRecordReader.read");
		baseline_python("official_read.py", "official read",
				"ArrayRecordReader(readahead_buffer_size:0).read(batch of shuffled indices), Python",
				py_dir, path, c, NULL, &out[2]);
	}
	if (grain) {
		begin_baseline(c, p, "grain pipeline");
		baseline_python("grain_pipeline.py", "grain pipeline",
				"MapDataset.source(ArrayRecordDataSource).shuffle().batch(), iterated in Python",
				py_dir, path, c, NULL, &out[3]);
	}
}

/*
 * grist.Loader iterated to numpy from Python (bench/py/grist_loader.py), with grist's own
 * engine settings: what a Python training loop gets, beside the C consumer's figure.
 */
static void python_loader_baseline(const char *path, const struct bench_config *c, struct bench_baseline *b)
{
	static const char *const engines[] = { "uring", "pread", "ref" };
	static const char *const modes[] = { "auto", "buffered", "direct", "mmap" };
	const struct grist_loader_config *l = &c->loader;
	char py_dir[4096], threads[16], prefetch[16], qd[16];
	struct child_out *co;
	size_t n = 0;
	char *extra[16];

	b->name = "python loader";
	if (!find_py_dir(py_dir, sizeof(py_dir))) {
		snprintf(b->why, sizeof(b->why), "bench/py/grist_loader.py not found (set GRIST_BENCH_PY to its folder)");
		return;
	}
	co = malloc(sizeof(*co));
	if (!co) {
		snprintf(b->why, sizeof(b->why), "out of memory");
		return;
	}
	run_child((char *const[]){ "python3", "-c", "import grist", NULL }, 120, co);
	if (co->status != 0) {
		snprintf(b->why, sizeof(b->why), "the grist Python package is not installed (pip install .): %.150s",
			 co->err_tail);
		free(co);
		return;
	}
	free(co);
	extra[n++] = "--engine";
	extra[n++] = (char *)engines[l->engine <= GRIST_ENGINE_REF ? l->engine : 0];
	extra[n++] = "--io";
	extra[n++] = (char *)modes[l->read_mode <= GRIST_READ_MMAP ? l->read_mode : 0];
	extra[n++] = "--granularity";
	extra[n++] = l->granularity == GRIST_GRANULARITY_CHUNK ? "chunk" : "record";
	if (l->threads) {
		snprintf(threads, sizeof(threads), "%u", l->threads);
		extra[n++] = "--threads";
		extra[n++] = threads;
	}
	if (l->prefetch) {
		snprintf(prefetch, sizeof(prefetch), "%u", l->prefetch);
		extra[n++] = "--prefetch";
		extra[n++] = prefetch;
	}
	if (l->queue_depth) {
		snprintf(qd, sizeof(qd), "%u", l->queue_depth);
		extra[n++] = "--queue-depth";
		extra[n++] = qd;
	}
	extra[n] = NULL;
	baseline_python("grist_loader.py", "python loader",
			"grist.Loader iterated in Python, batch.data/offsets as numpy views (same settings)", py_dir,
			path, c, extra, b);
}

void bench_run_baselines(const char *path, const struct bench_config *c, struct bench_baseline out[BENCH_BASELINES])
{
	struct bench_progress p;
	bool official, grain;

	memset(out, 0, sizeof(struct bench_baseline) * BENCH_BASELINES);
	bench_progress_begin(&p, c->progress, "baselines");
	if (wanted(c, out, 0, "fio")) {
		begin_baseline(c, &p, "fio");
		baseline_fio(path, c, &out[0]);
	}
	if (wanted(c, out, 1, "pread loop")) {
		begin_baseline(c, &p, "pread loop");
		baseline_pread(path, c, &out[1]);
	}
	official = wanted(c, out, 2, "official read");
	grain = wanted(c, out, 3, "grain pipeline");
	if (official || grain)
		python_baselines(path, c, &p, official, grain, out);
	if (wanted(c, out, 4, "codec, one core")) {
		/* CPU only, from a sample read before the timed part: the cache state does not matter. */
		if (p.on)
			fprintf(stderr, "\r\033[Kbaselines: codec on one core, %.0f s", c->seconds);
		bench_baseline_codec(path, c, &out[4]);
	}
	if (wanted(c, out, 5, "python loader")) {
		begin_baseline(c, &p, "python loader");
		python_loader_baseline(path, c, &out[5]);
	}
	bench_progress_end(&p);
}
