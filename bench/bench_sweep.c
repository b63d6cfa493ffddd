/*
 * `grist-bench --sweep`: one knob at a time around a base configuration, to CSV and gnuplot
 * PNGs; with --compare, fio beside every point (alternating which runs first) and the ratio.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "cli.h"

enum axis_kind { AXIS_THREADS, AXIS_QD, AXIS_RECORD_SIZE, AXIS_GROUP_SIZE, AXIS_PREFETCH, AXIS_BATCH };

struct axis {
	const char *name;          /* also the CSV/PNG file stem */
	const char *label;         /* x axis label */
	enum axis_kind kind;
	bool log_x;
	bool needs_generated;      /* its points are separate generated datasets */
	uint64_t values[16];
	size_t n;
};

static void set_axis_value(struct bench_config *c, struct bench_data *d, enum axis_kind k, uint64_t v)
{
	switch (k) {
	case AXIS_THREADS:
		c->loader.threads = (unsigned)v;
		break;
	case AXIS_QD:
		c->loader.queue_depth = (unsigned)v;
		break;
	case AXIS_PREFETCH:
		c->loader.prefetch = (unsigned)v;
		break;
	case AXIS_RECORD_SIZE:
		/* Keep the dataset's bytes near the base dataset's, so large records do not fill the disk. */
		d->records = d->records * d->record_size / v;
		if (d->records < 1000)
			d->records = 1000;
		d->record_size = v;
		break;
	case AXIS_GROUP_SIZE:
		d->group_size = v;
		break;
	case AXIS_BATCH:
		c->loader.batch_size = v;
		break;
	}
}

static const char csv_header[] =
	"axis,value,records,record_size,group_size,threads,queue_depth,prefetch,records_per_s,batches_per_s,"
	"bytes_read_per_s,bytes_decoded_per_s,cpu_cores,batch_p50_ms,batch_p99_ms,first_batch_ms,"
	"consumer_stall_share,io_wait_share,decode_share,producer_stall_share,batch_size,reads_in_flight_mean,"
	"fio_records_per_s,fio_bytes_per_s,grist_fio_ratio\n";

/* fio beside one point: its median over the rounds and the median of the pairs' grist/fio ratios. */
struct point_fio {
	bool ran;
	double records_per_s, bytes_per_s, ratio;
};

static void csv_row(FILE *f, const struct axis *ax, uint64_t v, const struct bench_data *d,
		    const struct bench_config *c, const struct bench_result *r, const struct point_fio *fio)
{
	fprintf(f, "%s,%llu,%llu,%llu,%llu,%u,%u,%u,%.1f,%.2f,%.1f,%.1f,%.3f,%.4f,%.4f,%.3f,%.4f,%.4f,%.4f,%.4f,"
		   "%llu,%.2f,%.1f,%.1f,%.4f\n",
		ax->name, (unsigned long long)v, (unsigned long long)d->records, (unsigned long long)d->record_size,
		(unsigned long long)d->group_size, r->stats.threads, c->loader.queue_depth, c->loader.prefetch,
		r->records_per_s, r->batches_per_s, r->read_bytes_per_s, r->decoded_bytes_per_s, r->cpu_cores,
		r->batch_p50_s * 1e3, r->batch_p99_s * 1e3, r->first_batch_s * 1e3, r->consumer_stall_share,
		r->io_wait_share, r->decode_share, r->producer_stall_share, (unsigned long long)c->loader.batch_size,
		r->stats.reads_in_flight_mean, fio->records_per_s, fio->bytes_per_s, fio->ratio);
}

/*
 * Write AXIS.gp and run gnuplot on it: records/s on the left, CPU cores on the right; with
 * fio beside each point, the grist/fio ratio on the left and both rates on the right.
 */
static int plot_axis(const char *out_dir, const struct axis *ax, bool fio, const char *title, char *why,
		     size_t cap)
{
	char gp[4200], png[4200], csv[4200];
	int status;
	pid_t pid;
	FILE *f;

	snprintf(gp, sizeof(gp), "%s/%s.gp", out_dir, ax->name);
	snprintf(png, sizeof(png), "%s/%s.png", out_dir, ax->name);
	snprintf(csv, sizeof(csv), "%s/%s.csv", out_dir, ax->name);
	f = fopen(gp, "w");
	if (!f) {
		snprintf(why, cap, "cannot write %s.gp in the output folder: %s", ax->name, strerror(errno));
		return -1;
	}
	if (fio)
		fprintf(f,
			"set terminal pngcairo size 900,520 noenhanced\n"
			"set output '%s'\n"
			"set datafile separator ','\n"
			"set key bottom right\n"
			"set title '%s'\n"
			"set xlabel '%s'\n%s"
			"set ylabel 'grist / fio (records/s, median of alternating pairs)'\n"
			"set y2label 'records/s'\n"
			"set ytics nomirror\nset y2tics\nset yrange [0:*]\nset y2range [0:*]\nset grid\n"
			"plot '%s' using 2:25 with linespoints lw 2 title 'grist / fio', \\\n"
			"     1 with lines dt 3 lc rgb 'gray' notitle, \\\n"
			"     '' using 2:9 axes x1y2 with linespoints dt 2 title 'grist records/s', \\\n"
			"     '' using 2:23 axes x1y2 with linespoints dt 4 title 'fio IOs/s x records per chunk'\n",
			png, title, ax->label, ax->log_x ? "set logscale x 2\n" : "", csv);
	else
		fprintf(f,
			"set terminal pngcairo size 900,520 noenhanced\n"
			"set output '%s'\n"
			"set datafile separator ','\n"
			"set key top left autotitle columnhead\n"
			"set title 'grist-bench --sweep: %s'\n"
			"set xlabel '%s'\n%s"
			"set ylabel 'records/s'\n"
			"set y2label 'CPU cores'\n"
			"set ytics nomirror\nset y2tics\nset yrange [0:*]\nset y2range [0:*]\nset grid\n"
			"plot '%s' using 2:9 with linespoints lw 2 title 'records/s', \\\n"
			"     '' using 2:13 axes x1y2 with linespoints dt 2 title 'CPU cores'\n",
			png, ax->name, ax->label, ax->log_x ? "set logscale x 2\n" : "", csv);
	if (fclose(f)) {
		snprintf(why, cap, "cannot write %s.gp in the output folder", ax->name);
		return -1;
	}
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		execlp("gnuplot", "gnuplot", gp, (char *)NULL);
		_exit(127);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status)) {
		snprintf(why, cap, "gnuplot %s.gp failed; the CSV is kept", ax->name);
		return -1;
	}
	return 0;
}

/* Whether axis @name is in the comma-separated @list (NULL: the default axes, all but batch_size). */
static bool axis_selected(const char *list, const struct axis *ax)
{
	size_t n = strlen(ax->name);

	if (!list)
		return ax->kind != AXIS_BATCH;
	for (const char *s = list; *s; s += strcspn(s, ",") + (s[strcspn(s, ",")] ? 1 : 0))
		if (strcspn(s, ",") == n && !strncmp(s, ax->name, n))
			return true;
	return false;
}

/*
 * One point, @repeat rounds. With @fio, each round runs grist and fio on the same file,
 * grist first in even rounds and fio first in odd ones (a disk that caches favours the
 * second reader), the page cache dropped before each when cold. *@r is the median round.
 */
static int run_point(const char *const *paths, size_t n, const struct bench_config *c, unsigned repeat,
		     bool fio, struct bench_result *r, struct point_fio *pf)
{
	struct bench_result runs[99];
	struct bench_baseline bl[BENCH_BASELINES];
	struct bench_config fc = *c;
	double rate[99], fio_rate[99], fio_bytes[99], ratio[99];
	unsigned k, nf = 0;
	char note[200];
	int rc;

	fc.baselines = 1u << 0; /* fio */
	*pf = (struct point_fio){ 0 };
	for (k = 0; k < repeat; k++) {
		bool fio_ran = false;

		for (int side = 0; side < 2; side++) {
			if ((side == 0) == (k % 2 == 0)) {
				for (size_t j = 0; j < n; j++)
					if (c->cold ? bench_drop_caches(note, sizeof(note)) : bench_warm_file(paths[j]))
						break;
				rc = bench_run_loader(paths, n, c, &runs[k]);
				if (rc)
					return rc;
				rate[k] = runs[k].records_per_s;
			} else if (fio) {
				bench_run_baselines(paths[0], &fc, bl); /* cold: drops the page cache itself */
				fio_ran = bl[0].ran && bl[0].records_per_s > 0;
				if (!fio_ran && k == 0)
					fprintf(stderr, "%s: sweep: fio did not run: %s\n", cli_command_name, bl[0].why);
			}
		}
		if (fio_ran) {
			fio_rate[nf] = bl[0].records_per_s;
			fio_bytes[nf] = bl[0].bytes_per_s;
			ratio[nf] = runs[k].records_per_s / bl[0].records_per_s;
			nf++;
		}
	}
	*r = runs[bench_median_index(rate, repeat)];
	if (nf) {
		size_t m = bench_median_index(fio_rate, nf);

		pf->ran = true;
		pf->records_per_s = fio_rate[m];
		pf->bytes_per_s = fio_bytes[m];
		pf->ratio = ratio[bench_median_index(ratio, nf)];
	}
	return 0;
}

int bench_sweep(const char *const *paths, size_t num_paths, const struct bench_data *d,
		const struct bench_config *base, const struct bench_sweep_opts *o)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	struct axis axes[] = {
		{ "threads", "decode threads", AXIS_THREADS, false, false, { 0 }, 0 },
		{ "queue_depth", "queue depth", AXIS_QD, true, false, { 1, 4, 16, 64, 256 }, 5 },
		{ "record_size", "record size (bytes)", AXIS_RECORD_SIZE, true, true, { 256, 1024, 4096, 65536 }, 4 },
		{ "group_size", "records per chunk", AXIS_GROUP_SIZE, true, true, { 1, 16, 256 }, 3 },
		{ "prefetch", "prefetch (batches)", AXIS_PREFETCH, true, false, { 1, 2, 4, 8, 16 }, 5 },
		{ "batch_size", "batch size (records)", AXIS_BATCH, true, false, { 1, 2, 4, 8, 16, 32, 64, 128, 256 }, 9 },
	};
	const size_t naxes = sizeof(axes) / sizeof(axes[0]);
	unsigned repeat = o->repeat ? o->repeat : 1;
	bool plots = true, first_point = true, json = o->json;
	char why[300], path[4096], label[64], title[300];
	struct bench_progress p;
	size_t total = 0, done = 0, i, k;
	int rc = CLI_EXIT_OK;

	if (ncpu < 1)
		ncpu = 1;
	for (k = 0; k < (size_t)(2 * ncpu) && k < 16; k++)
		axes[0].values[k] = k + 1;
	axes[0].n = k;
	if (o->axes) {
		for (const char *s = o->axes; *s; s += strcspn(s, ",") + (s[strcspn(s, ",")] ? 1 : 0)) {
			for (i = 0; i < naxes; i++)
				if (strcspn(s, ",") == strlen(axes[i].name) && !strncmp(s, axes[i].name, strlen(axes[i].name)))
					break;
			if (i == naxes) {
				fprintf(stderr, "%s: --sweep: '%.*s' is not an axis (threads, queue_depth, record_size, "
						"group_size, prefetch, batch_size)\n",
					cli_command_name, (int)strcspn(s, ","), s);
				return CLI_EXIT_USAGE;
			}
		}
	}
	if (mkdir(o->out_dir, 0755) && errno != EEXIST) {
		fprintf(stderr, "%s: cannot create %s: %s\n", cli_command_name, o->out_dir, strerror(errno));
		return CLI_EXIT_DATA;
	}
	for (i = 0; i < naxes; i++) {
		if (!axis_selected(o->axes, &axes[i]))
			continue;
		if (axes[i].needs_generated && !d) {
			fprintf(stderr, "%s: sweep: the %s axis needs generated datasets; skipped because FILEs were given\n",
				cli_command_name, axes[i].name);
			continue;
		}
		total += axes[i].n;
	}
	if (!bench_have_program("gnuplot", "gnuplot-nox", why, sizeof(why))) {
		fprintf(stderr, "%s: sweep: no plots: %s; the CSV files are written anyway\n", cli_command_name, why);
		plots = false;
	}
	if (json)
		printf("{\"out_dir\": \"%s\", \"points\": [", o->out_dir);
	else if (o->compare)
		printf("%-12s %8s %14s %12s %8s %14s %10s %10s\n", "axis", "value", "records/s", "MB/s read", "cores",
		       "fio records/s", "grist/fio", "in flight");
	else
		printf("%-12s %8s %14s %12s %8s %10s\n", "axis", "value", "records/s", "MB/s read", "cores",
		       "p99 ms");
	for (i = 0; i < naxes && rc == CLI_EXIT_OK; i++) {
		const struct axis *ax = &axes[i];
		char csv[4200];
		FILE *f;

		if (!axis_selected(o->axes, ax) || (ax->needs_generated && !d))
			continue;
		snprintf(csv, sizeof(csv), "%s/%s.csv", o->out_dir, ax->name);
		f = fopen(csv, "w");
		if (!f) {
			fprintf(stderr, "%s: cannot write %s: %s\n", cli_command_name, csv, strerror(errno));
			rc = CLI_EXIT_DATA;
			break;
		}
		fputs(csv_header, f);
		for (k = 0; k < ax->n; k++) {
			struct bench_config c = *base;
			struct bench_data dd = d ? *d : (struct bench_data){ 0 };
			const char *one[1];
			const char *const *run_paths = paths;
			size_t run_n = num_paths;
			struct bench_result r;
			struct point_fio pf;

			set_axis_value(&c, &dd, ax->kind, ax->values[k]);
			c.progress = false;
			if (ax->needs_generated) {
				rc = bench_dataset_ensure(&dd, path, sizeof(path), true);
				if (rc)
					break;
				one[0] = path;
				run_paths = one;
				run_n = 1;
			}
			snprintf(label, sizeof(label), "sweep %s=%llu (%zu/%zu)", ax->name,
				 (unsigned long long)ax->values[k], done + 1, total);
			bench_progress_begin(&p, base->progress, label);
			if (p.on)
				fprintf(stderr, "\r\033[K%s, %.0f s, ETA %.0f s", label, c.seconds,
					(double)(total - done) * c.seconds * repeat * (o->compare ? 2 : 1));
			rc = run_point(run_paths, run_n, &c, repeat, o->compare, &r, &pf);
			bench_progress_end(&p);
			if (rc)
				break;
			done++;
			csv_row(f, ax, ax->values[k], &dd, &c, &r, &pf);
			if (json) {
				printf("%s{\"axis\": \"%s\", \"value\": %llu, \"result\": ", first_point ? "" : ", ",
				       ax->name, (unsigned long long)ax->values[k]);
				bench_print_result_json(stdout, &r);
				if (pf.ran)
					printf(", \"fio_records_per_s\": %.1f, \"grist_fio_ratio\": %.4f", pf.records_per_s,
					       pf.ratio);
				printf("}");
				first_point = false;
			} else if (o->compare) {
				printf("%-12s %8llu %14.0f %12.1f %8.2f %14.0f %10.3f %10.1f\n", ax->name,
				       (unsigned long long)ax->values[k], r.records_per_s, r.read_bytes_per_s / 1e6,
				       r.cpu_cores, pf.records_per_s, pf.ratio, r.stats.reads_in_flight_mean);
				fflush(stdout);
			} else {
				printf("%-12s %8llu %14.0f %12.1f %8.2f %10.3f\n", ax->name,
				       (unsigned long long)ax->values[k], r.records_per_s, r.read_bytes_per_s / 1e6,
				       r.cpu_cores, r.batch_p99_s * 1e3);
				fflush(stdout);
			}
		}
		if (fclose(f) && rc == CLI_EXIT_OK) {
			fprintf(stderr, "%s: cannot write %s\n", cli_command_name, csv);
			rc = CLI_EXIT_DATA;
		}
		snprintf(title, sizeof(title), "grist-bench --sweep %s%s: %llu-byte records, queue depth %u, %u threads",
			 ax->name, o->compare ? (base->cold ? " --cold --compare" : " --compare") : "",
			 (unsigned long long)(d ? d->record_size : 0), base->loader.queue_depth, base->loader.threads);
		if (rc == CLI_EXIT_OK && plots && plot_axis(o->out_dir, ax, o->compare, title, why, sizeof(why)))
			fprintf(stderr, "%s: sweep: %s\n", cli_command_name, why);
	}
	if (json)
		printf("]}\n");
	if (rc == CLI_EXIT_OK)
		fprintf(stderr, "%s: sweep: CSV%s in %s\n", cli_command_name, plots ? " and PNG plots" : "", o->out_dir);
	return rc;
}
