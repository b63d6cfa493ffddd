/* `grist bench --sweep`: one knob at a time around a base configuration, to CSV and gnuplot PNGs. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "cli.h"

enum axis_kind { AXIS_THREADS, AXIS_QD, AXIS_RECORD_SIZE, AXIS_GROUP_SIZE, AXIS_PREFETCH };

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
	}
}

static const char csv_header[] =
	"axis,value,records,record_size,group_size,threads,queue_depth,prefetch,records_per_s,batches_per_s,"
	"bytes_read_per_s,bytes_decoded_per_s,cpu_cores,batch_p50_ms,batch_p99_ms,first_batch_ms,"
	"consumer_stall_share,io_wait_share,decode_share,producer_stall_share\n";

static void csv_row(FILE *f, const struct axis *ax, uint64_t v, const struct bench_data *d,
		    const struct bench_config *c, const struct bench_result *r)
{
	fprintf(f, "%s,%llu,%llu,%llu,%llu,%u,%u,%u,%.1f,%.2f,%.1f,%.1f,%.3f,%.4f,%.4f,%.3f,%.4f,%.4f,%.4f,%.4f\n",
		ax->name, (unsigned long long)v, (unsigned long long)d->records, (unsigned long long)d->record_size,
		(unsigned long long)d->group_size, r->stats.threads, c->loader.queue_depth, c->loader.prefetch,
		r->records_per_s, r->batches_per_s, r->read_bytes_per_s, r->decoded_bytes_per_s, r->cpu_cores,
		r->batch_p50_s * 1e3, r->batch_p99_s * 1e3, r->first_batch_s * 1e3, r->consumer_stall_share,
		r->io_wait_share, r->decode_share, r->producer_stall_share);
}

/* Write AXIS.gp and run gnuplot on it: records/s and MB/s read on the left, CPU cores on the right. */
static int plot_axis(const char *out_dir, const struct axis *ax, char *why, size_t cap)
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
	fprintf(f,
		"set terminal pngcairo size 900,520 noenhanced\n"
		"set output '%s'\n"
		"set datafile separator ','\n"
		"set key top left autotitle columnhead\n"
		"set title 'grist bench --sweep: %s'\n"
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

int bench_sweep(const char *const *paths, size_t num_paths, const struct bench_data *d,
		const struct bench_config *base, const char *out_dir, bool json)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	struct axis axes[] = {
		{ "threads", "decode threads", AXIS_THREADS, false, false, { 0 }, 0 },
		{ "queue_depth", "queue depth", AXIS_QD, true, false, { 1, 4, 16, 64, 256 }, 5 },
		{ "record_size", "record size (bytes)", AXIS_RECORD_SIZE, true, true, { 256, 1024, 4096, 65536 }, 4 },
		{ "group_size", "records per chunk", AXIS_GROUP_SIZE, true, true, { 1, 16, 256 }, 3 },
		{ "prefetch", "prefetch (batches)", AXIS_PREFETCH, true, false, { 1, 2, 4, 8, 16 }, 5 },
	};
	const size_t naxes = sizeof(axes) / sizeof(axes[0]);
	bool plots = true, first_point = true;
	char why[300], path[4096], label[64];
	struct bench_progress p;
	size_t total = 0, done = 0, i, k;
	int rc = CLI_EXIT_OK;

	if (ncpu < 1)
		ncpu = 1;
	for (k = 0; k < (size_t)(2 * ncpu) && k < 16; k++)
		axes[0].values[k] = k + 1;
	axes[0].n = k;
	if (mkdir(out_dir, 0755) && errno != EEXIST) {
		fprintf(stderr, "%s: cannot create %s: %s\n", cli_command_name, out_dir, strerror(errno));
		return CLI_EXIT_DATA;
	}
	for (i = 0; i < naxes; i++) {
		if (axes[i].needs_generated && !d) {
			fprintf(stderr, "%s: sweep: the %s axis needs generated datasets; skipped because FILEs were given\n",
				cli_command_name, axes[i].name);
			continue;
		}
		total += axes[i].n;
	}
	if (!bench_ensure_program("gnuplot", "gnuplot-nox", why, sizeof(why))) {
		fprintf(stderr, "%s: sweep: no plots: %s; the CSV files are written anyway\n", cli_command_name, why);
		plots = false;
	}
	if (json)
		printf("{\"out_dir\": \"%s\", \"points\": [", out_dir);
	else
		printf("%-12s %8s %14s %12s %8s %10s\n", "axis", "value", "records/s", "MB/s read", "cores",
		       "p99 ms");
	for (i = 0; i < naxes && rc == CLI_EXIT_OK; i++) {
		const struct axis *ax = &axes[i];
		char csv[4200];
		FILE *f;

		if (ax->needs_generated && !d)
			continue;
		snprintf(csv, sizeof(csv), "%s/%s.csv", out_dir, ax->name);
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
			char note[200];

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
			for (size_t j = 0; j < run_n; j++)
				if (c.cold ? bench_drop_caches(note, sizeof(note)) : bench_warm_file(run_paths[j]))
					break;
			snprintf(label, sizeof(label), "sweep %s=%llu (%zu/%zu)", ax->name,
				 (unsigned long long)ax->values[k], done + 1, total);
			bench_progress_begin(&p, base->progress, label);
			if (p.on)
				fprintf(stderr, "\r\033[K%s, %.0f s, ETA %.0f s", label, c.seconds,
					(double)(total - done) * c.seconds);
			rc = bench_run_loader(run_paths, run_n, &c, &r);
			bench_progress_end(&p);
			if (rc)
				break;
			done++;
			csv_row(f, ax, ax->values[k], &dd, &c, &r);
			if (json) {
				printf("%s{\"axis\": \"%s\", \"value\": %llu, \"result\": ", first_point ? "" : ", ",
				       ax->name, (unsigned long long)ax->values[k]);
				bench_print_result_json(stdout, &r);
				printf("}");
				first_point = false;
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
		if (rc == CLI_EXIT_OK && plots && plot_axis(out_dir, ax, why, sizeof(why)))
			fprintf(stderr, "%s: sweep: %s\n", cli_command_name, why);
	}
	if (json)
		printf("]}\n");
	if (rc == CLI_EXIT_OK)
		fprintf(stderr, "%s: sweep: CSV%s in %s\n", cli_command_name, plots ? " and PNG plots" : "", out_dir);
	return rc;
}
