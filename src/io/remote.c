/*
 * The remote backend's shared parts: its options, the credentials from the environment,
 * the latency histogram, opening (pinning) an object, and one GET's life from setup to
 * verdict. http.c drives many GETs on one multi handle; the blocking calls here drive one.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <sys/uio.h>

#include "common/error.h"
#include "common/number.h"
#include "grist/options.h"
#include "io/io.h"
#include "io/http_date.h"
#include "io/http_fields.h"
#include "io/remote.h"
#include "io/s3_sign.h"
#include "io/tls.h"

#define ERRBODY_MAX 16384

uint64_t grist_remote_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- process-wide state: curl, options, credentials ---- */

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static int global_ret;

static void global_init_once(void)
{
	global_ret = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK ? 0 : -ENOMEM;
}

static int env_check(void);

int grist_remote_global_init(void)
{
	pthread_once(&global_once, global_init_once);
	if (global_ret)
		return grist_fail(global_ret, "cannot initialise libcurl");
	return env_check();
}

static pthread_mutex_t opt_lock = PTHREAD_MUTEX_INITIALIZER;
static bool opt_set;
static struct grist_remote_options opt_cur;

GRIST_API void grist_remote_options_init(struct grist_remote_options *o)
{
	memset(o, 0, sizeof(*o));
	o->size = sizeof(*o);
	o->connect_timeout_ms = GRIST_REMOTE_DEFAULT_CONNECT_TIMEOUT_MS;
	o->request_timeout_ms = GRIST_REMOTE_DEFAULT_TIMEOUT_MS;
	o->retries = GRIST_REMOTE_DEFAULT_RETRIES;
	o->backoff_ms = GRIST_REMOTE_DEFAULT_BACKOFF_MS;
	o->backoff_max_ms = GRIST_REMOTE_DEFAULT_BACKOFF_MAX_MS;
	o->coalesce_bytes = (uint64_t)GRIST_REMOTE_DEFAULT_COALESCE_MIB << 20;
	o->split_bytes = (uint64_t)GRIST_REMOTE_DEFAULT_SPLIT_MIB << 20;
	o->max_inflight = GRIST_REMOTE_DEFAULT_INFLIGHT;
	o->min_inflight = GRIST_REMOTE_DEFAULT_INFLIGHT_MIN;
	o->redirects = GRIST_REMOTE_DEFAULT_REDIRECTS;
	o->part_mib = GRIST_REMOTE_DEFAULT_PART_MIB;
	o->upload_inflight = GRIST_REMOTE_DEFAULT_UPLOAD_INFLIGHT;
	o->direct = GRIST_REMOTE_DIRECT_ON;
}

/* The byte fields an older caller left zero (grist/remote.h): their defaults. */
static void byte_defaults(struct grist_remote_options *o)
{
	if (!o->min_inflight)
		o->min_inflight = GRIST_REMOTE_DEFAULT_INFLIGHT_MIN;
	if (!o->redirects)
		o->redirects = GRIST_REMOTE_DEFAULT_REDIRECTS;
	if (!o->part_mib)
		o->part_mib = GRIST_REMOTE_DEFAULT_PART_MIB;
	if (!o->upload_inflight)
		o->upload_inflight = GRIST_REMOTE_DEFAULT_UPLOAD_INFLIGHT;
	if (!o->direct)
		o->direct = GRIST_REMOTE_DIRECT_ON;
}

/* The bounds of every option, checked in this one place. */
static int check_options(const struct grist_remote_options *o)
{
	if (o->connect_timeout_ms < 1 || o->connect_timeout_ms > 600000)
		return grist_fail(-EINVAL, "remote option connect_timeout_ms=%u is outside [1, 600000]",
				  o->connect_timeout_ms);
	if (o->request_timeout_ms < 1 || o->request_timeout_ms > 3600000)
		return grist_fail(-EINVAL, "remote option timeout_ms=%u is outside [1, 3600000]",
				  o->request_timeout_ms);
	if (o->retries > 100)
		return grist_fail(-EINVAL, "remote option retries=%u is outside [0, 100]", o->retries);
	if (o->backoff_ms < 1 || o->backoff_ms > 600000 || o->backoff_max_ms < o->backoff_ms ||
	    o->backoff_max_ms > 600000)
		return grist_fail(-EINVAL, "remote options backoff_ms=%u, backoff_max_ms=%u: need 1 <= backoff_ms "
				  "<= backoff_max_ms <= 600000", o->backoff_ms, o->backoff_max_ms);
	if (o->split_bytes < 4096 || o->split_bytes > (1u << 30))
		return grist_fail(-EINVAL, "remote option split=%" PRIu64 " is outside [4 KiB, 1 GiB]",
				  o->split_bytes);
	if (o->coalesce_bytes > o->split_bytes)
		return grist_fail(-EINVAL, "remote option coalesce=%" PRIu64 " is above split=%" PRIu64,
				  o->coalesce_bytes, o->split_bytes);
	if (o->max_inflight < 1 || o->max_inflight > 4096)
		return grist_fail(-EINVAL, "remote option inflight=%u is outside [1, 4096]", o->max_inflight);
	/* above inflight it is inflight: --remote inflight:1 alone stays valid; 0 is the default */
	if (o->min_inflight > 4096)
		return grist_fail(-EINVAL, "remote option inflight_min=%u is outside [1, 4096]", o->min_inflight);
	if (o->redirects < 1 || o->redirects > 50)
		return grist_fail(-EINVAL, "remote option redirects=%u is outside [1, 50]", o->redirects);
	/* S3 refuses parts below 5 MiB (but the last); above 64 MiB a retry resends too much */
	if (o->part_mib < 5 || o->part_mib > 64)
		return grist_fail(-EINVAL, "remote option part=%u MiB is outside [5 MiB, 64 MiB]", o->part_mib);
	if (o->upload_inflight < 1 || o->upload_inflight > 32)
		return grist_fail(-EINVAL, "remote option upload_inflight=%u is outside [1, 32]", o->upload_inflight);
	if (o->direct != GRIST_REMOTE_DIRECT_ON && o->direct != GRIST_REMOTE_DIRECT_OFF)
		return grist_fail(-EINVAL, "remote options: direct=%u is neither %d (on) nor %d (off)", o->direct,
				  GRIST_REMOTE_DIRECT_ON, GRIST_REMOTE_DIRECT_OFF);
	return 0;
}

/* A value of the grammar: a whole number, or a size read as every grist size is (grist_parse_size()). */
static int parse_u64(const char *name, const char *v, size_t n, bool size, uint64_t *out)
{
	char tmp[32];
	const char *end;
	bool ok;

	ok = n && n < sizeof(tmp);
	if (ok) {
		memcpy(tmp, v, n);
		tmp[n] = '\0';
		ok = size ? grist_parse_size(tmp, out) == 0 : grist_parse_digits(tmp, out, &end) && !*end;
	}
	if (!ok)
		return grist_fail(-EINVAL, "remote option %s: '%.*s' is not %s", name, (int)n, v,
				  size ? "a size (bytes, or with K, M, G, T or KiB, MiB, GiB, TiB: powers of 1024)"
				       : "a whole number");
	return 0;
}

GRIST_API int grist_remote_options_parse(const char *text, struct grist_remote_options *o)
{
	static const struct {
		const char *name;
		size_t off;
		unsigned char width; /* bytes of the field */
		bool size;
	} table[] = {
		{ "connect_timeout_ms", offsetof(struct grist_remote_options, connect_timeout_ms), 4, false },
		{ "timeout_ms", offsetof(struct grist_remote_options, request_timeout_ms), 4, false },
		{ "retries", offsetof(struct grist_remote_options, retries), 4, false },
		{ "backoff_ms", offsetof(struct grist_remote_options, backoff_ms), 4, false },
		{ "backoff_max_ms", offsetof(struct grist_remote_options, backoff_max_ms), 4, false },
		{ "coalesce", offsetof(struct grist_remote_options, coalesce_bytes), 8, true },
		{ "split", offsetof(struct grist_remote_options, split_bytes), 8, true },
		{ "inflight", offsetof(struct grist_remote_options, max_inflight), 4, false },
		{ "inflight_min", offsetof(struct grist_remote_options, min_inflight), 4, false },
		{ "redirects", offsetof(struct grist_remote_options, redirects), 1, false },
		{ "part", offsetof(struct grist_remote_options, part_mib), 1, true },
		{ "upload_inflight", offsetof(struct grist_remote_options, upload_inflight), 1, false },
		{ "direct", offsetof(struct grist_remote_options, direct), 1, false },
	};
	struct grist_remote_options t;
	const char *p = text;
	bool split = false, coalesce = false;
	int ret;

	if (!o || !text)
		return grist_fail(-EINVAL, "grist_remote_options_parse: NULL argument");
	if (o->size != sizeof(*o))
		return grist_fail(-EINVAL, "grist_remote_options_parse: options not initialised "
				  "(size %zu, expected %zu)", o->size, sizeof(*o));
	t = *o;
	while (*p) {
		const char *comma = p + strcspn(p, ","), *colon = memchr(p, ':', (size_t)(comma - p));
		size_t k, nlen;
		uint64_t v = 0;

		if (!colon)
			return grist_fail(-EINVAL, "remote option '%.*s': expected name:value", (int)(comma - p), p);
		nlen = (size_t)(colon - p);
		for (k = 0; k < sizeof(table) / sizeof(table[0]); k++)
			if (strlen(table[k].name) == nlen && !memcmp(table[k].name, p, nlen))
				break;
		if (k == sizeof(table) / sizeof(table[0]))
			return grist_fail(-EINVAL, "unknown remote option '%.*s' (known: connect_timeout_ms, "
					  "timeout_ms, retries, backoff_ms, backoff_max_ms, coalesce, split, "
					  "inflight, inflight_min, redirects, part, upload_inflight, direct)", (int)nlen, p);
		ret = parse_u64(table[k].name, colon + 1, (size_t)(comma - colon - 1), table[k].size, &v);
		if (ret)
			return ret;
		if (table[k].width == 8) {
			memcpy((char *)&t + table[k].off, &v, sizeof(v));
		} else if (table[k].width == 4) {
			unsigned u = (unsigned)v;

			if (v > UINT32_MAX)
				return grist_fail(-EINVAL, "remote option %s=%" PRIu64 " is too large",
						  table[k].name, v);
			memcpy((char *)&t + table[k].off, &u, sizeof(u));
		} else {
			uint8_t b;

			/* part is a size kept in whole MiB: the byte fields fit the struct's old padding */
			if (table[k].size && v % (1u << 20))
				return grist_fail(-EINVAL, "remote option part=%" PRIu64 " is not a whole number of MiB", v);
			if (table[k].size)
				v >>= 20;
			/* direct is 0 or 1 as written, 2 or 1 as kept (0 kept is an older caller's default) */
			if (table[k].off == offsetof(struct grist_remote_options, direct)) {
				if (v > 1)
					return grist_fail(-EINVAL, "remote option direct=%" PRIu64 " is not 0 or 1", v);
				v = v ? GRIST_REMOTE_DIRECT_ON : GRIST_REMOTE_DIRECT_OFF;
			}
			if (v > 255)
				return grist_fail(-EINVAL, "remote option %s=%" PRIu64 "%s is too large", table[k].name,
						  v, table[k].size ? " MiB" : "");
			b = (uint8_t)v;
			memcpy((char *)&t + table[k].off, &b, sizeof(b));
		}
		split |= table[k].off == offsetof(struct grist_remote_options, split_bytes);
		coalesce |= table[k].off == offsetof(struct grist_remote_options, coalesce_bytes);
		p = *comma ? comma + 1 : comma;
	}
	/*
	 * split alone below the default coalesce (1 MiB) asks for shorter GETs, not for an
	 * error: no gap may be wider than a GET, so coalesce comes down to it. A coalesce set
	 * before (an earlier --remote-coalesce, applied by the option table one name at a
	 * time) is the caller's choice and is never lowered: above split it is refused below,
	 * whichever order the two came in, as when both are in this text.
	 */
	if (split && !coalesce && t.coalesce_bytes > t.split_bytes &&
	    o->coalesce_bytes == (uint64_t)GRIST_REMOTE_DEFAULT_COALESCE_MIB << 20)
		t.coalesce_bytes = t.split_bytes;
	ret = check_options(&t);
	if (ret)
		return ret;
	*o = t;
	return 0;
}

/*
 * @o: the defaults with GRIST_REMOTE_OPTIONS applied. A variable that does not parse leaves
 * the defaults and its error is returned: env_defaults() goes on without it, env_check()
 * refuses it.
 */
static int env_parse(struct grist_remote_options *o)
{
	const char *env = getenv("GRIST_REMOTE_OPTIONS");
	struct grist_remote_options t;
	int ret;

	grist_remote_options_init(o);
	if (!env || !*env)
		return 0;
	t = *o;
	ret = grist_remote_options_parse(env, &t);
	if (!ret)
		*o = t;
	return ret;
}

static void env_defaults(struct grist_remote_options *o)
{
	(void)env_parse(o);
}

/*
 * A GRIST_REMOTE_OPTIONS that does not parse (a misspelt name, a value out of bounds) is an
 * error of every remote operation, checked where each begins (grist_remote_global_init()):
 * dropped silently, it would leave all of its options, the sound ones too, at their defaults.
 */
static int env_check(void)
{
	struct grist_remote_options t;
	int ret = env_parse(&t);

	return ret ? grist_fail_prefix(ret, "GRIST_REMOTE_OPTIONS='%.200s'", getenv("GRIST_REMOTE_OPTIONS")) : 0;
}

int grist_remote_options_resolve(const struct grist_remote_options *in, struct grist_remote_options *out)
{
	struct grist_remote_options t;
	int ret;

	if (in->size < offsetof(struct grist_remote_options, connect_timeout_ms) || in->size > sizeof(t))
		return grist_fail(-EINVAL, "remote options: size %zu is not a grist_remote_options", in->size);
	env_defaults(&t);
	memcpy(&t, in, in->size);
	t.size = sizeof(t);
	byte_defaults(&t); /* an older caller's zeroed padding (grist/remote.h) */
	ret = check_options(&t);
	if (ret)
		return ret;
	*out = t;
	return 0;
}

GRIST_API int grist_remote_set_options(const struct grist_remote_options *o)
{
	struct grist_remote_options t;
	int ret;

	if (!o) {
		pthread_mutex_lock(&opt_lock);
		opt_set = false;
		pthread_mutex_unlock(&opt_lock);
		return 0;
	}
	ret = grist_remote_options_resolve(o, &t);
	if (ret)
		return ret;
	pthread_mutex_lock(&opt_lock);
	opt_cur = t;
	opt_set = true;
	pthread_mutex_unlock(&opt_lock);
	return 0;
}

void grist_remote_options_current(struct grist_remote_options *o)
{
	pthread_mutex_lock(&opt_lock);
	if (opt_set)
		*o = opt_cur;
	else
		env_defaults(o);
	pthread_mutex_unlock(&opt_lock);
}

GRIST_API void grist_remote_get_options(struct grist_remote_options *o)
{
	grist_remote_options_current(o);
}

GRIST_API const char *grist_remote_retry_cause_name(int cause)
{
	static const char *const names[GRIST_REMOTE_RETRY_CAUSES] = { "5xx", "slowdown", "reset",
								       "timeout", "short", "token" };

	return cause >= 0 && cause < GRIST_REMOTE_RETRY_CAUSES ? names[cause] : "unknown";
}

GRIST_API bool grist_path_is_url(const char *path)
{
	return grist_url_scheme(path) != GRIST_URL_LOCAL;
}

/* Credentials: read from the environment once, again when a server says the token expired. */
struct creds {
	char ak[256], sk[256], region[64];
	char token[4096];
	bool loaded;
};

static pthread_mutex_t creds_lock = PTHREAD_MUTEX_INITIALIZER;
static struct creds creds_cur;

static void copy_env(char *dst, size_t cap, const char *a, const char *b)
{
	const char *v = getenv(a);

	if ((!v || !*v) && b)
		v = getenv(b);
	snprintf(dst, cap, "%s", v ? v : "");
}

static void creds_load_locked(void)
{
	copy_env(creds_cur.ak, sizeof(creds_cur.ak), "AWS_ACCESS_KEY_ID", NULL);
	copy_env(creds_cur.sk, sizeof(creds_cur.sk), "AWS_SECRET_ACCESS_KEY", NULL);
	copy_env(creds_cur.token, sizeof(creds_cur.token), "AWS_SESSION_TOKEN", NULL);
	copy_env(creds_cur.region, sizeof(creds_cur.region), "AWS_REGION", "AWS_DEFAULT_REGION");
	creds_cur.loaded = true;
}

static void creds_get(struct creds *c, bool reload)
{
	pthread_mutex_lock(&creds_lock);
	if (!creds_cur.loaded || reload)
		creds_load_locked();
	*c = creds_cur;
	pthread_mutex_unlock(&creds_lock);
}

void grist_remote_region(enum grist_url_scheme s, char *out, size_t cap)
{
	struct creds c;

	creds_get(&c, false);
	snprintf(out, cap, "%s", c.region[0] ? c.region : s == GRIST_URL_GS ? "auto" : "us-east-1");
	memset(&c, 0, sizeof(c));
}

/* ---- counters ---- */

static unsigned lat_bucket(uint64_t us)
{
	unsigned b, sub;

	if (us < 8)
		return (unsigned)us;
	b = 63u - (unsigned)__builtin_clzll(us); /* us in [2^b, 2^(b+1)), b >= 3 */
	sub = (unsigned)((us >> (b - 3)) & 7u);
	b = (b - 2) * 8 + sub;
	return b < GRIST_REMOTE_LAT_BUCKETS ? b : GRIST_REMOTE_LAT_BUCKETS - 1;
}

/* The upper edge of bucket @b in microseconds. */
static uint64_t lat_edge(unsigned b)
{
	unsigned e, sub;

	if (b < 8)
		return b + 1;
	e = b / 8 + 2;
	sub = b % 8;
	return ((8ull + sub + 1) << (e - 3));
}

void grist_remote_counters_add_get(struct grist_remote_counters *c, const struct grist_remote_xfer *x,
				   bool retried, uint64_t now)
{
	__atomic_fetch_add(&c->requests, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&c->bytes, x->got, __ATOMIC_RELAXED);
	__atomic_fetch_add(&c->latency[lat_bucket((now - x->start_ns) / 1000)], 1, __ATOMIC_RELAXED);
	if (retried && x->cause >= 0 && x->cause < GRIST_REMOTE_RETRY_CAUSES) /* a redirect is no retry */
		__atomic_fetch_add(&c->retries[x->cause], 1, __ATOMIC_RELAXED);
}

static uint64_t ld(const uint64_t *p)
{
	return __atomic_load_n(p, __ATOMIC_RELAXED);
}

static uint64_t percentile(const uint64_t *h, uint64_t total, double q)
{
	uint64_t want = (uint64_t)((double)total * q + 0.999999), seen = 0;
	unsigned b;

	if (!total)
		return 0;
	if (!want)
		want = 1;
	for (b = 0; b < GRIST_REMOTE_LAT_BUCKETS; b++) {
		seen += h[b];
		if (seen >= want)
			return lat_edge(b);
	}
	return lat_edge(GRIST_REMOTE_LAT_BUCKETS - 1);
}

void grist_remote_counters_read(const struct grist_remote_counters *c, struct grist_remote_stats *st,
				struct grist_remote_budget_stats *bs)
{
	uint64_t h[GRIST_REMOTE_LAT_BUCKETS], total = 0, span;
	unsigned i;

	memset(st, 0, sizeof(*st));
	st->requests = ld(&c->requests);
	st->bytes = ld(&c->bytes);
	st->errors = ld(&c->errors);
	for (i = 0; i < GRIST_REMOTE_RETRY_CAUSES; i++)
		st->retries[i] = ld(&c->retries[i]);
	span = ld(&c->inflight_span);
	st->inflight_mean = span ? (double)ld(&c->inflight_area) / (double)span : 0;
	st->inflight_max = ld(&c->inflight_max);
	memset(bs, 0, sizeof(*bs));
	/* the byte areas are kept in KiB x ns, room for hours of 64 MiB in flight */
	bs->inflight_bytes_mean = span ? 1024.0 * (double)ld(&c->inflight_bytes_area) / (double)span : 0;
	bs->ahead_bytes_mean = span ? 1024.0 * (double)ld(&c->ahead_bytes_area) / (double)span : 0;
	bs->budget_bytes = ld(&c->budget_sum);
	bs->budget_max_bytes = ld(&c->budget_max);
	bs->rtt_us = ld(&c->rtt_ns) / 1000;
	bs->bandwidth = ld(&c->bandwidth);
	for (i = 0; i < GRIST_REMOTE_LAT_BUCKETS; i++) {
		h[i] = ld(&c->latency[i]);
		total += h[i];
	}
	st->latency_p50_us = percentile(h, total, 0.50);
	st->latency_p99_us = percentile(h, total, 0.99);
}

void grist_remote_count_opening(struct grist_remote_counters *to, const struct grist_remote_object *o)
{
	if (o && o->opening)
		grist_remote_counters_merge(to, o->opening);
}

void grist_remote_counters_merge(struct grist_remote_counters *to, const struct grist_remote_counters *from)
{
	uint64_t m = ld(&from->inflight_max);
	unsigned i;

	__atomic_fetch_add(&to->requests, ld(&from->requests), __ATOMIC_RELAXED);
	__atomic_fetch_add(&to->bytes, ld(&from->bytes), __ATOMIC_RELAXED);
	__atomic_fetch_add(&to->errors, ld(&from->errors), __ATOMIC_RELAXED);
	for (i = 0; i < GRIST_REMOTE_RETRY_CAUSES; i++)
		__atomic_fetch_add(&to->retries[i], ld(&from->retries[i]), __ATOMIC_RELAXED);
	__atomic_fetch_add(&to->inflight_area, ld(&from->inflight_area), __ATOMIC_RELAXED);
	__atomic_fetch_add(&to->inflight_span, ld(&from->inflight_span), __ATOMIC_RELAXED);
	__atomic_fetch_add(&to->inflight_bytes_area, ld(&from->inflight_bytes_area), __ATOMIC_RELAXED);
	__atomic_fetch_add(&to->ahead_bytes_area, ld(&from->ahead_bytes_area), __ATOMIC_RELAXED);
	__atomic_fetch_add(&to->budget_sum, ld(&from->budget_sum), __ATOMIC_RELAXED);
	if (m > ld(&to->inflight_max))
		__atomic_store_n(&to->inflight_max, m, __ATOMIC_RELAXED);
	if (ld(&from->budget_max) > ld(&to->budget_max))
		__atomic_store_n(&to->budget_max, ld(&from->budget_max), __ATOMIC_RELAXED);
	if (ld(&from->rtt_ns))
		__atomic_store_n(&to->rtt_ns, ld(&from->rtt_ns), __ATOMIC_RELAXED);
	if (ld(&from->bandwidth))
		__atomic_store_n(&to->bandwidth, ld(&from->bandwidth), __ATOMIC_RELAXED);
	for (i = 0; i < GRIST_REMOTE_LAT_BUCKETS; i++)
		__atomic_fetch_add(&to->latency[i], ld(&from->latency[i]), __ATOMIC_RELAXED);
}

/* ---- one GET ---- */

/*
 * Retry-After's seconds: delta-seconds ("120", at most 2^31: http_fields.h), or an HTTP-date
 * (RFC 9110: "Wed, 25 Nov 2026 14:00:00 GMT", or either obsolete form), which says when to
 * come back: the seconds from now to then, 0 for a date gone by. -1 when it is neither
 * ("120abc", "-5"): a field grist cannot read is one the server did not send, and the
 * jittered backoff applies. backoff() caps both forms by backoff_max_ms.
 */
static long retry_after(const char *v)
{
	time_t t, now = time(NULL);
	uint64_t s;

	if (!grist_http_delta_seconds_parse(v, &s))
		return s < (uint64_t)LONG_MAX ? (long)s : LONG_MAX;
	if (grist_http_date_parse(v, now, &t))
		return -1;
	return t > now ? (long)(t - now) : 0;
}

/* @v for a message to quote: at most @cap - 1 bytes, anything but printable ASCII as '?'. */
static void quotable(char *out, size_t cap, const char *v)
{
	size_t i;

	for (i = 0; i + 1 < cap && v[i]; i++)
		out[i] = v[i] >= 0x20 && v[i] < 0x7f ? v[i] : '?';
	out[i] = '\0';
}

static void cr_forget(struct grist_remote_xfer *x)
{
	x->has_range = false;
	x->cr_bad = false;
	x->cr = (struct grist_http_content_range){ 0 };
	x->cr_text[0] = '\0';
}

/*
 * A Content-Range as sent: its range in cr_*, and its text in cr_text for a message, judged
 * once the status is known. A 416's "bytes *" then "/length" is its right form, and a non-2xx
 * answer's body is only read for its error code, so nothing here fails the transfer:
 * cr_refusal() does, for 2xx.
 */
static void content_range(struct grist_remote_xfer *x, const char *v, bool truncated)
{
	struct grist_http_content_range cr;

	cr_forget(x);
	quotable(x->cr_text, sizeof(x->cr_text), v + strspn(v, " \t"));
	/* a line cut to fit the buffer could read as a shorter, valid value */
	if (truncated || grist_http_content_range_parse(v, &cr)) {
		x->cr_bad = true;
		return;
	}
	x->cr = cr;
	x->has_range = !cr.unsatisfied;
}

static size_t on_header(char *p, size_t size, size_t n, void *ud)
{
	grist_remote_header(ud, p, size * n);
	return size * n;
}

void grist_remote_header(struct grist_remote_xfer *x, const char *p, size_t len)
{
	size_t nl, content = len;
	char line[512];

	line[0] = 0;
	if (len > 9 && !strncasecmp(p, "location:", 9)) {
		/* whole, not cut to line[]: a presigned target's query runs to a kilobyte or more */
		const char *v = p + 9;
		size_t vn;

		while (content && (p[content - 1] == '\r' || p[content - 1] == '\n'))
			content--;
		while (v < p + content && (*v == ' ' || *v == '\t'))
			v++;
		vn = (size_t)(p + content - v);
		while (vn && (v[vn - 1] == ' ' || v[vn - 1] == '\t'))
			vn--;
		x->location_long = vn >= sizeof(x->location);
		snprintf(x->location, sizeof(x->location), "%.*s", x->location_long ? 0 : (int)vn, v);
		return;
	}

	while (content && (p[content - 1] == '\r' || p[content - 1] == '\n'))
		content--;
	nl = len < sizeof(line) - 1 ? len : sizeof(line) - 1;
	memcpy(line, p, nl);
	line[nl] = '\0';
	while (nl && (line[nl - 1] == '\r' || line[nl - 1] == '\n'))
		line[--nl] = '\0';
	if (!strncmp(line, "HTTP/", 5)) {
		/* a new response (after a 100 Continue, say): forget the last one's headers */
		cr_forget(x);
		x->etag[0] = '\0';
		x->location[0] = '\0';
		x->location_long = false;
		x->retry_after_s = -1;
		return;
	}
	if (!strncasecmp(line, "content-range:", 14)) {
		content_range(x, line + 14, content > sizeof(line) - 1);
	} else if (!strncasecmp(line, "etag:", 5)) {
		const char *v = line + 5;

		while (*v == ' ')
			v++;
		snprintf(x->etag, sizeof(x->etag), "%.255s", v);
	} else if (!strncasecmp(line, "retry-after:", 12)) {
		x->retry_after_s = content > sizeof(line) - 1 ? -1 : retry_after(line + 12);
	}
}

static size_t refuse(struct grist_remote_xfer *x, int code, const char *fmt, ...) GRIST_PRINTF(3, 4);
static size_t refuse(struct grist_remote_xfer *x, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(x->bad, sizeof(x->bad), fmt, ap);
	va_end(ap);
	x->bad_code = code;
	return 0; /* curl aborts the transfer with CURLE_WRITE_ERROR */
}

/*
 * Whether a 2xx answer's Content-Range is one grist cannot act on; @why says how, quoting it.
 * Its length ("/1000") is how the opening GET learns the object's size and how a later GET
 * sees the object replaced (body_start()). A "*" for the length, unknown, is taken only where
 * the size is known already (x->obj->size, from the opening): the range is still checked
 * against the request, and If-Match (the ETag) still guards against a replacement. Anywhere
 * else, the opening suffix GET above all (open_finish() takes the size from it), the size
 * would be a guess: refused.
 */
static bool cr_refusal(const struct grist_remote_xfer *x, char *why, size_t cap)
{
	if (x->cr_bad)
		snprintf(why, cap, "a malformed Content-Range header: '%s'", x->cr_text);
	else if (x->cr.unsatisfied)
		snprintf(why, cap, "a Content-Range header that names no range: '%s'", x->cr_text);
	else if (x->cr.complete_unknown && !(x->obj && x->obj->size))
		snprintf(why, cap, "a Content-Range header without the object's size, which grist needs "
			 "here: '%s'", x->cr_text);
	else
		return false;
	return true;
}

/* The answer's status: curl's, or the direct path's own (set when its head was parsed). */
static long response_code(const struct grist_remote_xfer *x)
{
	long status = 0;

	if (x->direct)
		return x->status;
	curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &status);
	return status;
}

/* The body's first bytes: decide where they go, before any lands in a caller's buffer. */
static size_t body_start(struct grist_remote_xfer *x)
{
	char why[sizeof(x->bad)];
	long status = response_code(x);

	x->status = status;
	x->body_started = true;
	x->first_ns = grist_remote_now_ns();
	if (status < 200 || status > 299)
		return 1; /* an error body: kept for its code */
	if (cr_refusal(x, why, sizeof(why)))
		return refuse(x, -EPROTO, "%s", why);
	if (x->has_range) {
		/* 206, or 200 with Content-Range as rclone answers: the range must be the one asked */
		if (x->obj && x->obj->size && !x->cr.complete_unknown && x->cr.complete != x->obj->size)
			return refuse(x, -ESTALE, "the object changed under the reader: its size is now %llu, "
				      "it was %llu when opened", (unsigned long long)x->cr.complete,
				      (unsigned long long)x->obj->size);
		if (!x->suffix && x->len && (x->cr.first != x->off || x->cr.last != x->off + x->len - 1))
			return refuse(x, -EPROTO, "asked for bytes %llu-%llu, the server sent %llu-%llu",
				      (unsigned long long)x->off, (unsigned long long)(x->off + x->len - 1),
				      (unsigned long long)x->cr.first, (unsigned long long)x->cr.last);
		x->base = x->cr.first;
	} else {
		if (status == 206)
			return refuse(x, -EPROTO, "a 206 answer without a Content-Range header");
		/* 200 and the whole object: fine only when the whole object was asked for */
		if (x->len && !x->suffix && x->off != 0)
			return refuse(x, -EPROTO, "the server ignored the Range header (200 without "
				      "Content-Range); grist needs ranged reads");
		x->base = 0;
	}
	return 1;
}

/*
 * Scatter @p, the body's bytes [at, end), into the segments, sorted by offset (they may
 * overlap: two reads of the same bytes); the bytes between them are the coalescing's gaps
 * and are dropped. A segment the bytes were received into already (the direct path) is
 * not copied onto itself.
 */
static void scatter(struct grist_remote_xfer *x, const uint8_t *p, uint64_t at, uint64_t end)
{
	unsigned k;

	for (k = x->seg_at; k < x->nsegs && x->segs[k].off < end; k++) {
		const struct grist_remote_seg *s = &x->segs[k];
		uint64_t a = s->off > at ? s->off : at, b = s->off + s->len < end ? s->off + s->len : end;

		if (a < b && s->buf + (a - s->off) != p + (a - at))
			memcpy(s->buf + (a - s->off), p + (a - at), (size_t)(b - a));
	}
	while (x->seg_at < x->nsegs && x->segs[x->seg_at].off + x->segs[x->seg_at].len <= end)
		x->seg_at++;
}

size_t grist_remote_body(struct grist_remote_xfer *x, const void *data, size_t len)
{
	const uint8_t *p = data;
	uint64_t at, end;

	if (!x->body_started && !body_start(x))
		return 0;
	if (x->status < 200 || x->status > 299) {
		if (x->errbody.len < ERRBODY_MAX)
			grist_buf_append(&x->errbody, p, len < ERRBODY_MAX - x->errbody.len ? len : ERRBODY_MAX - x->errbody.len);
		return len;
	}
	at = x->base + x->got;
	end = at + len;
	if (x->keep) {
		if (x->keep->len + len > x->keep_max)
			return refuse(x, -EPROTO, "the answer is longer than the %zu bytes expected%s", x->keep_max,
				      x->suffix ? " (does the server ignore Range?)" : "");
		if (grist_buf_append(x->keep, p, len))
			return refuse(x, -ENOMEM, "out of memory keeping the answer");
	}
	if (x->len && !x->suffix && end > x->off + x->len)
		return refuse(x, -EPROTO, "the body runs past the %llu bytes asked for",
			      (unsigned long long)x->len);
	scatter(x, p, at, end);
	x->got += len;
	return len;
}

static size_t on_body(char *p, size_t size, size_t n, void *ud)
{
	return grist_remote_body(ud, p, size * n);
}

bool grist_remote_body_begin(struct grist_remote_xfer *x)
{
	return x->body_started || body_start(x);
}

unsigned grist_remote_body_iov(struct grist_remote_xfer *x, struct iovec *iov, unsigned max, uint64_t limit,
				uint8_t *scratch, size_t scratch_len)
{
	uint64_t at = x->base + x->got, stop = x->len && !x->suffix ? x->off + x->len : UINT64_MAX;
	unsigned k = x->seg_at, n = 0;

	if (!x->body_started || x->keep || x->status < 200 || x->status > 299)
		return 0;
	if (stop - at > limit)
		stop = at + limit;
	while (at < stop && n < max) {
		uint64_t e;

		/* sorted by offset: the first segment reaching past at covers it, or none does */
		while (k < x->nsegs && x->segs[k].off + x->segs[k].len <= at)
			k++;
		if (k < x->nsegs && x->segs[k].off <= at) {
			const struct grist_remote_seg *s = &x->segs[k];

			e = s->off + s->len < stop ? s->off + s->len : stop;
			iov[n].iov_base = s->buf + (at - s->off);
		} else {
			/* a gap between segments: into the scratch space, dropped */
			e = k < x->nsegs && x->segs[k].off < stop ? x->segs[k].off : stop;
			if (e - at > scratch_len)
				e = at + scratch_len;
			iov[n].iov_base = scratch;
		}
		iov[n++].iov_len = (size_t)(e - at);
		at = e;
	}
	return n;
}

size_t grist_remote_body_landed(struct grist_remote_xfer *x, const uint8_t *dst, size_t len)
{
	uint64_t at = x->base + x->got;

	scatter(x, dst, at, at + len);
	x->got += len;
	return len;
}

static int add_header(struct grist_remote_xfer *x, const char *name, const char *value)
{
	char line[8192];
	struct curl_slist *l;

	/* "Name:" with nothing after it tells curl not to send a header it would add */
	snprintf(line, sizeof(line), *value ? "%s: %s" : "%s:%s", name, value);
	l = curl_slist_append(x->headers, line);
	if (!l)
		return -ENOMEM;
	x->headers = l;
	return 0;
}

void grist_remote_xfer_release(struct grist_remote_xfer *x)
{
	grist_redirect_release(x);
	curl_slist_free_all(x->headers);
	x->headers = NULL;
	grist_buf_free(&x->errbody);
	grist_buf_free(&x->url);
	x->target = NULL;
}

/* The transfer's cancel flag turned: stop it (CURLE_ABORTED_BY_CALLBACK, never retried). */
static int on_progress(void *ud, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow)
{
	const struct grist_remote_xfer *x = ud;

	(void)dltotal;
	(void)dlnow;
	(void)ultotal;
	(void)ulnow;
	return __atomic_load_n(x->cancel, __ATOMIC_ACQUIRE) != 0;
}

/* A write's method and body (upload.c); nothing for a GET. 0 or -ENOMEM. */
static int setup_body(struct grist_remote_xfer *x)
{
	if (x->cancel) {
		curl_easy_setopt(x->easy, CURLOPT_XFERINFOFUNCTION, on_progress);
		curl_easy_setopt(x->easy, CURLOPT_XFERINFODATA, x);
		curl_easy_setopt(x->easy, CURLOPT_NOPROGRESS, 0L);
	}
	if (!x->method)
		return 0;
	curl_easy_setopt(x->easy, CURLOPT_CUSTOMREQUEST, x->method);
	if (strcmp(x->method, "PUT") && strcmp(x->method, "POST"))
		return 0;
	/* the body from memory, as it is (no form encoding), resent whole by a retry */
	curl_easy_setopt(x->easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)x->body_len);
	curl_easy_setopt(x->easy, CURLOPT_POSTFIELDS, x->body ? (const char *)x->body : "");
	/* no "Expect: 100-continue" round trip before each part: the body goes at once */
	return add_header(x, "Expect", "") || add_header(x, "Content-Type", "application/octet-stream") ||
			       (x->content_md5 && add_header(x, "Content-MD5", x->content_md5))
		       ? -ENOMEM
		       : 0;
}

int grist_remote_xfer_setup(struct grist_remote_xfer *x)
{
	const struct grist_url *u = grist_redirect_pick(x);
	bool origin = u == x->u; /* a hop's query is its own Location's: the request's goes only to u */
	struct grist_buf query = { 0 }, authz = { 0 };
	char range[64], date[17], region[64];
	struct creds c;
	int ret = -ENOMEM;

	curl_slist_free_all(x->headers);
	x->headers = NULL;
	x->errbody.len = 0;
	x->status = 0;
	cr_forget(x);
	x->etag[0] = '\0';
	x->location[0] = '\0';
	x->location_long = false;
	x->retry_after_s = -1;
	x->got = 0;
	x->first_ns = 0;
	x->base = 0;
	x->seg_at = 0;
	x->body_started = false;
	x->direct = false;
	x->bad[0] = '\0';
	x->bad_code = 0;
	x->curl_err[0] = '\0';
	if (x->keep)
		x->keep->len = 0;
	if (!x->rng)
		x->rng = grist_remote_now_ns() ^ (uintptr_t)x;
	x->url.len = 0;
	if (origin && grist_sigv4_query(&query, x->query, x->nquery))
		goto out;
	if (grist_buf_append(&x->url, u->endpoint, strlen(u->endpoint)) ||
	    grist_buf_append(&x->url, u->path, strlen(u->path)) ||
	    (query.len && (grist_buf_append(&x->url, "?", 1) || grist_buf_append(&x->url, query.data, query.len))) ||
	    grist_buf_append(&x->url, "", 1))
		goto out;
	x->target = (const char *)x->url.data + strlen(u->endpoint);
	curl_easy_reset(x->easy);
	curl_easy_setopt(x->easy, CURLOPT_URL, (const char *)x->url.data);
	/* the path is signed as sent: curl must not squash "/./" or "//" in a key */
	curl_easy_setopt(x->easy, CURLOPT_PATH_AS_IS, 1L);
	curl_easy_setopt(x->easy, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
	curl_easy_setopt(x->easy, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(x->easy, CURLOPT_PROTOCOLS_STR, "http,https");
	grist_tls_trust(x->easy);
	curl_easy_setopt(x->easy, CURLOPT_CONNECTTIMEOUT_MS, (long)x->opt->connect_timeout_ms);
	/*
	 * timeout_ms is a stall rule, not a deadline: a GET that brings less than 1 KiB/s for
	 * that long (whole seconds, rounded up: curl's granularity) ends as a timeout. A
	 * deadline on the whole transfer cut a big GET over a slow link on every attempt, the
	 * retries included. The deadline stays as a cap, STALL_CAP times as long, so a server
	 * trickling just above the floor cannot hold a reader for ever.
	 */
	curl_easy_setopt(x->easy, CURLOPT_LOW_SPEED_LIMIT, (long)STALL_BYTES_PER_S);
	curl_easy_setopt(x->easy, CURLOPT_LOW_SPEED_TIME, (long)((x->opt->request_timeout_ms + 999) / 1000));
	curl_easy_setopt(x->easy, CURLOPT_TIMEOUT_MS, (long)x->opt->request_timeout_ms * STALL_CAP);
	if (x->deadline_ns) {
		uint64_t now = grist_remote_now_ns();
		long left = x->deadline_ns > now ? (long)((x->deadline_ns - now) / 1000000) + 1 : 1;

		if (left < (long)x->opt->request_timeout_ms * STALL_CAP)
			curl_easy_setopt(x->easy, CURLOPT_TIMEOUT_MS, left);
		if (left < (long)x->opt->connect_timeout_ms)
			curl_easy_setopt(x->easy, CURLOPT_CONNECTTIMEOUT_MS, left);
	}
	curl_easy_setopt(x->easy, CURLOPT_TCP_NODELAY, 1L);
	/* larger reads from the socket: fewer recv calls and write callbacks per GET (16 KiB by default) */
	curl_easy_setopt(x->easy, CURLOPT_BUFFERSIZE, 256L * 1024);
	curl_easy_setopt(x->easy, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(x->easy, CURLOPT_HEADERDATA, x);
	curl_easy_setopt(x->easy, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(x->easy, CURLOPT_WRITEDATA, x);
	curl_easy_setopt(x->easy, CURLOPT_ERRORBUFFER, x->curl_err);
	curl_easy_setopt(x->easy, CURLOPT_PRIVATE, x);
	/* no Accept-Encoding: a compressed answer would not be the bytes of the range */
	if (x->suffix)
		snprintf(range, sizeof(range), "bytes=-%llu", (unsigned long long)x->len);
	else if (x->len)
		snprintf(range, sizeof(range), "bytes=%llu-%llu", (unsigned long long)x->off,
			 (unsigned long long)(x->off + x->len - 1));
	if ((x->suffix || x->len) && add_header(x, "Range", range))
		goto out;
	if (setup_body(x))
		goto out;
	if (x->obj && x->obj->etag[0] && add_header(x, "If-Match", x->obj->etag))
		goto out;
	if (u->scheme != GRIST_URL_HTTP) {
		time_t now = time(NULL);
		struct tm tm;

		creds_get(&c, false);
		snprintf(region, sizeof(region), "%s", c.region[0] ? c.region : u->scheme == GRIST_URL_GS ? "auto" : "us-east-1");
		gmtime_r(&now, &tm);
		strftime(date, sizeof(date), "%Y%m%dT%H%M%SZ", &tm);
		if (add_header(x, "Host", u->host))
			goto out;
		if (c.ak[0] && c.sk[0]) {
			struct grist_sigv4_pair h[5] = {
				{ "host", u->host },
				{ "x-amz-content-sha256", "UNSIGNED-PAYLOAD" },
				{ "x-amz-date", date },
			};
			size_t nh = 3;
			struct grist_sigv4 in = {
				.method = x->method ? x->method : "GET", .canonical_uri = u->path,
				.query = origin ? x->query : NULL, .nquery = origin ? x->nquery : 0,
				.headers = h, .payload_hash = "UNSIGNED-PAYLOAD",
				.amz_date = date, .region = region, .service = "s3",
				.access_key = c.ak, .secret_key = c.sk,
			};

			/* the body's MD5 is signed too: a part cannot be swapped under its signature */
			if (x->content_md5)
				h[nh++] = (struct grist_sigv4_pair){ "content-md5", x->content_md5 };
			if (c.token[0])
				h[nh++] = (struct grist_sigv4_pair){ "x-amz-security-token", c.token };
			in.nheaders = nh;
			ret = grist_sigv4_sign(&in, NULL, NULL, NULL, &authz);
			if (ret)
				goto out;
			ret = -ENOMEM;
			if (add_header(x, "x-amz-content-sha256", "UNSIGNED-PAYLOAD") ||
			    add_header(x, "x-amz-date", date) ||
			    (c.token[0] && add_header(x, "x-amz-security-token", c.token)) ||
			    add_header(x, "Authorization", (const char *)authz.data))
				goto out;
		}
		memset(&c, 0, sizeof(c));
	}
	curl_easy_setopt(x->easy, CURLOPT_HTTPHEADER, x->headers);
	x->start_ns = grist_remote_now_ns();
	ret = 0;
out:
	grist_buf_free(&query);
	grist_buf_free(&authz);
	return ret ? grist_fail(ret, "%s: cannot prepare a request: out of memory", x->display) : 0;
}

const char *grist_xml_next(const char *p, const char *end, const char *tag, const char **val, size_t *len)
{
	char open[64], close[64];
	const char *s, *e;

	snprintf(open, sizeof(open), "<%s>", tag);
	snprintf(close, sizeof(close), "</%s>", tag);
	s = memmem(p, (size_t)(end - p), open, strlen(open));
	if (!s)
		return NULL;
	s += strlen(open);
	e = memmem(s, (size_t)(end - s), close, strlen(close));
	if (!e)
		return NULL;
	*val = s;
	*len = (size_t)(e - s);
	return e + strlen(close);
}

/*
 * The XML entities servers use (the five named ones, &#N; and &#xN;), decoded in place:
 * ListObjectsV2 keys, and the <Code> and <Message> of an error (Go's encoder, rclone's,
 * writes a quote as &#34;).
 */
int grist_xml_unescape(char *s)
{
	static const struct {
		const char *ent;
		char c;
	} ents[] = { { "&amp;", '&' }, { "&lt;", '<' }, { "&gt;", '>' }, { "&quot;", '"' }, { "&apos;", '\'' } };
	char *w = s;
	size_t k;

	while (*s) {
		if (*s != '&') {
			*w++ = *s++;
			continue;
		}
		for (k = 0; k < sizeof(ents) / sizeof(ents[0]); k++)
			if (!strncmp(s, ents[k].ent, strlen(ents[k].ent)))
				break;
		if (k < sizeof(ents) / sizeof(ents[0])) {
			*w++ = ents[k].c;
			s += strlen(ents[k].ent);
			continue;
		}
		if (s[1] == '#') {
			char *end;
			unsigned long cp = s[2] == 'x' ? strtoul(s + 3, &end, 16) : strtoul(s + 2, &end, 10);

			if (*end != ';' || cp == 0 || cp > 0x10ffff)
				return -EPROTO;
			/* UTF-8 encode the code point */
			if (cp < 0x80) {
				*w++ = (char)cp;
			} else if (cp < 0x800) {
				*w++ = (char)(0xc0 | (cp >> 6));
				*w++ = (char)(0x80 | (cp & 0x3f));
			} else if (cp < 0x10000) {
				*w++ = (char)(0xe0 | (cp >> 12));
				*w++ = (char)(0x80 | ((cp >> 6) & 0x3f));
				*w++ = (char)(0x80 | (cp & 0x3f));
			} else {
				*w++ = (char)(0xf0 | (cp >> 18));
				*w++ = (char)(0x80 | ((cp >> 12) & 0x3f));
				*w++ = (char)(0x80 | ((cp >> 6) & 0x3f));
				*w++ = (char)(0x80 | (cp & 0x3f));
			}
			s = end + 1;
			continue;
		}
		return -EPROTO;
	}
	*w = '\0';
	return 0;
}

/* The text between <Tag> and </Tag> in an XML body, or "". */
static void xml_field(const struct grist_buf *b, const char *tag, char *out, size_t cap)
{
	const char *v;
	size_t n;

	out[0] = '\0';
	if (b->len && b->data && grist_xml_next((const char *)b->data, (const char *)b->data + b->len, tag, &v, &n)) {
		char *t = strndup(v, n);

		/* decoded whole, then cut to fit: an entity cut in two would not decode */
		if (t && !grist_xml_unescape(t))
			snprintf(out, cap, "%s", t);
		else
			snprintf(out, cap, "%.*s", (int)n, v);
		free(t);
	}
}

static void backoff(struct grist_remote_xfer *x, int cause)
{
	uint64_t cap = (uint64_t)x->opt->backoff_ms * 1000000ull, max = (uint64_t)x->opt->backoff_max_ms * 1000000ull;
	unsigned k;

	for (k = 0; k < x->attempt && cap < max; k++)
		cap *= 2;
	if (cap > max)
		cap = max;
	/* full jitter: a crowd of clients told to slow down does not come back in step */
	x->rng ^= x->rng << 13;
	x->rng ^= x->rng >> 7;
	x->rng ^= x->rng << 17;
	x->delay_ns = cap ? x->rng % cap : 0;
	if (x->retry_after_s >= 0) {
		/* in seconds first: a wait past 2^64 ns (584 years) would wrap to a short one */
		uint64_t ra = (uint64_t)x->retry_after_s;

		x->delay_ns = ra <= max / 1000000000ull ? ra * 1000000000ull : max;
	}
	x->cause = cause;
}

static enum grist_remote_outcome fail(struct grist_remote_xfer *x, int code, const char *fmt, ...)
	GRIST_PRINTF(3, 4);
static enum grist_remote_outcome fail(struct grist_remote_xfer *x, int code, const char *fmt, ...)
{
	char body[sizeof(((struct grist_remote_xfer *)0)->msg)];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(body, sizeof(body), fmt, ap);
	va_end(ap);
	snprintf(x->msg, sizeof(x->msg), "%s", body);
	x->error = code;
	return GRIST_REMOTE_DONE;
}

/* Retry while attempts remain, else fail with what the last attempt said. */
static enum grist_remote_outcome retry_or_fail(struct grist_remote_xfer *x, int cause, int code, const char *what)
{
	if (x->attempt < x->opt->retries) {
		backoff(x, cause);
		if (!x->deadline_ns || grist_remote_now_ns() + x->delay_ns < x->deadline_ns) {
			x->attempt++;
			return GRIST_REMOTE_RETRY;
		}
	}
	return fail(x, code, "%s (after %u attempts)", what, x->attempt + 1);
}

static enum grist_remote_outcome judge(struct grist_remote_xfer *x, CURLcode rc)
{
	char code[128], message[256], what[512];
	long status = 0;
	uint64_t want;

	x->error = 0;
	x->msg[0] = '\0';
	status = response_code(x);
	x->status = status;
	if (x->bad[0])
		return fail(x, x->bad_code, "HTTP %ld: %s", status, x->bad);
	if (rc != CURLE_OK) {
		snprintf(what, sizeof(what), "%s", x->curl_err[0] ? x->curl_err : curl_easy_strerror(rc));
		switch (grist_tls_failure(rc, grist_redirect_pick(x)->host,
					  x->curl_err[0] ? x->curl_err : curl_easy_strerror(rc), what, sizeof(what))) {
		case 0:
			break;
		case -ECONNRESET:
			return retry_or_fail(x, GRIST_REMOTE_RETRY_RESET, -ECONNRESET, what);
		default:
			return fail(x, -EPROTO, "%s", what);
		}
		switch (rc) {
		case CURLE_OPERATION_TIMEDOUT:
			return retry_or_fail(x, GRIST_REMOTE_RETRY_TIMEOUT, -ETIMEDOUT, what);
		case CURLE_COULDNT_CONNECT:
			return retry_or_fail(x, GRIST_REMOTE_RETRY_RESET, -ECONNREFUSED, what);
		case CURLE_RECV_ERROR:
		case CURLE_SEND_ERROR:
		case CURLE_GOT_NOTHING:
			return retry_or_fail(x, GRIST_REMOTE_RETRY_RESET, -ECONNRESET, what);
		case CURLE_PARTIAL_FILE:
			return retry_or_fail(x, GRIST_REMOTE_RETRY_SHORT, -EIO, what);
		case CURLE_COULDNT_RESOLVE_HOST:
		case CURLE_COULDNT_RESOLVE_PROXY:
			return fail(x, -EHOSTUNREACH, "%s", what);
		default:
			return fail(x, -EIO, "%s", what);
		}
	}
	if (status >= 200 && status <= 299) {
		if (x->obj && x->obj->etag[0] && x->etag[0] && strcmp(x->obj->etag, x->etag))
			return fail(x, -ESTALE, "HTTP %ld: the object changed under the reader (ETag %s when "
				    "opened, now %s)", status, x->obj->etag, x->etag);
		/* an empty body never reached body_start(): its Content-Range is judged here */
		if (!x->body_started && cr_refusal(x, what, sizeof(what)))
			return fail(x, -EPROTO, "HTTP %ld: %s", status, what);
		want = x->suffix ? 0 : x->len;
		if (!x->body_started && !want && !x->keep)
			return GRIST_REMOTE_DONE;
		if (want && x->got < want) {
			/* the server promised less than we asked? only past the object's end */
			if (x->has_range && !x->cr.complete_unknown && x->cr.last + 1 == x->cr.complete &&
			    x->got == x->cr.last + 1 - x->off)
				return fail(x, -EBADMSG, "HTTP %ld: bytes %llu-%llu asked, the object ends at %llu",
					    status, (unsigned long long)x->off,
					    (unsigned long long)(x->off + x->len - 1), (unsigned long long)x->cr.complete);
			snprintf(what, sizeof(what), "HTTP %ld: a short body: %llu of %llu bytes", status,
				 (unsigned long long)x->got, (unsigned long long)want);
			return retry_or_fail(x, GRIST_REMOTE_RETRY_SHORT, -EIO, what);
		}
		return GRIST_REMOTE_DONE;
	}
	if (status == 301 || status == 302 || status == 303 || status == 307 || status == 308) {
		if (x->method && strcmp(x->method, "GET"))
			return fail(x, -EPROTO, "HTTP %ld: a redirect answering a %s (grist follows redirects of "
				    "reads only)", status, x->method);
		if (grist_redirect_follow(x))
			return GRIST_REMOTE_DONE;
		x->delay_ns = 0;
		x->cause = -1; /* not a retry: no attempt spent, none counted */
		return GRIST_REMOTE_RETRY;
	}
	xml_field(&x->errbody, "Code", code, sizeof(code));
	xml_field(&x->errbody, "Message", message, sizeof(message));
	snprintf(what, sizeof(what), "HTTP %ld%s%s%s%s", status, code[0] ? " " : "", code,
		 message[0] ? ": " : "", message);
	if (!strcmp(code, "ExpiredToken") || !strcmp(code, "TokenRefreshRequired") ||
	    !strcmp(code, "ExpiredTokenException")) {
		struct creds c;

		creds_get(&c, true); /* re-read the environment: a refreshed token may be there */
		memset(&c, 0, sizeof(c));
		return retry_or_fail(x, GRIST_REMOTE_RETRY_TOKEN, -EACCES, what);
	}
	switch (status) {
	case 503:
	case 429:
		return retry_or_fail(x, !strcmp(code, "SlowDown") || status == 429 ? GRIST_REMOTE_RETRY_SLOWDOWN
										 : GRIST_REMOTE_RETRY_5XX,
				     -EIO, what);
	case 500:
	case 502:
	case 504:
		return retry_or_fail(x, GRIST_REMOTE_RETRY_5XX, -EIO, what);
	case 401:
	case 403:
		/* a target that worked refuses now: a signed redirect target expired; ask the origin again */
		if (x->at_target && x->attempt < x->opt->retries) {
			x->from_origin = true;
			x->attempt++;
			x->delay_ns = 0;
			x->cause = GRIST_REMOTE_RETRY_TOKEN;
			return GRIST_REMOTE_RETRY;
		}
		return fail(x, -EACCES, "%s%s", what, x->at != x->u ? " (at a redirect's target)" : "");
	case 404:
		/* an object that was there at open and is gone now was changed under the reader too */
		if (x->obj)
			return fail(x, -ESTALE, "%s: the object changed under the reader (gone since it was opened)",
				    what);
		return fail(x, -ENOENT, "%s", what);
	case 412:
		return fail(x, -ESTALE, "%s: the object changed under the reader (it was ETag %s when opened)",
			    what, x->obj ? x->obj->etag : "?");
	default:
		return fail(x, -EPROTO, "%s", what);
	}
}

enum grist_remote_outcome grist_remote_xfer_finish(struct grist_remote_xfer *x, CURLcode rc)
{
	enum grist_remote_outcome o = judge(x, rc);

	if (o == GRIST_REMOTE_DONE) {
		if (!x->error)
			grist_redirect_arrived(x);
		/* the next GET of this transfer starts from its object's target, or u */
		grist_redirect_release(x);
		x->from_origin = false;
	}
	return o;
}
