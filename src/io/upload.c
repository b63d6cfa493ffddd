/*
 * Multipart uploads to s3:// and gs:// (see upload.h for the contract).
 *
 * The caller's thread cuts parts; `upload_inflight` threads of the upload's own each take
 * the oldest part not yet sent, hash it (MD5: Content-MD5, signed, which the server checks)
 * and PUT it with grist_remote_xfer_run(): the retries, timeouts and error messages of
 * reads. A part's buffer goes back to the pool when its PUT ends, so the caller, who waits
 * for a free buffer, is held to (upload_inflight + 1) parts in memory. Threads, not one
 * multi handle on the caller's thread: the caller is busy compressing between writes, and
 * the PUTs must go on meanwhile.
 *
 * A process that ends on a signal: upload_live.c keeps every upload from open to free and
 * aborts them all at once (grist_upload_abort_all()).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <openssl/evp.h>

#include "common/error.h"
#include "common/thread.h"
#include "io/io.h"
#include "io/remote.h"
#include "io/s3_sign.h"
#include "io/upload.h"
#include "io/upload_impl.h"
#include "grist/remote.h"

#define ANSWER_MAX 65536
/* an object smaller than this is one PutObject at commit; larger, a multipart upload (one part or more) */
#define PUT_MAX (1u << 20)

/* ---- one request ---- */

static void md5_of(const void *p, size_t n, unsigned char out[16])
{
	unsigned int len = 16;

	EVP_Digest(p, n, out, &len, EVP_md5(), NULL);
}

/* A request of @u's (upload_impl.h). */
void grist_upload_request_init(struct grist_upload *u, struct grist_remote_xfer *x, const char *method,
			       const struct grist_sigv4_pair *query, size_t nq)
{
	memset(x, 0, sizeof(*x));
	x->u = &u->u;
	x->display = u->url;
	x->method = method;
	x->query = query;
	x->nquery = nq;
	x->opt = &u->opt;
}

/*
 * One request on @u's key: @method with @query, the body @body (Content-MD5 @md5 when not
 * NULL), the answer's body into @answer (when not NULL). 0, or the error (grist_fail) with
 * the URL, the status and the service's code.
 */
static int request(struct grist_upload *u, const char *method, const struct grist_sigv4_pair *query, size_t nq,
		   const uint8_t *body, size_t len, const unsigned char *md5, struct grist_buf *answer,
		   char *etag, size_t etag_cap, bool cancellable)
{
	struct grist_remote_xfer x;
	unsigned char b64[32];
	int ret;

	grist_upload_request_init(u, &x, method, query, nq);
	x.body = body;
	x.body_len = len;
	if (md5) {
		EVP_EncodeBlock(b64, md5, 16);
		x.content_md5 = (const char *)b64;
	}
	x.keep = answer;
	x.keep_max = ANSWER_MAX;
	x.cancel = cancellable ? &u->cancel : NULL;
	ret = grist_remote_xfer_run(&x);
	if (!ret && etag)
		snprintf(etag, etag_cap, "%s", x.etag);
	grist_remote_xfer_release(&x);
	return ret;
}

/* An ETag that is an MD5 (32 hex digits, quoted or not) equal to @md5; other forms are not judged. */
static bool etag_matches(const char *etag, const char *want_hex)
{
	size_t n = strlen(etag);

	if (n >= 2 && etag[0] == '"' && etag[n - 1] == '"') {
		etag++;
		n -= 2;
	}
	if (n != strlen(want_hex))
		return !(n == 32 && strspn(etag, "0123456789abcdefABCDEF") == 32) && !strchr(etag, '-');
	return !strncasecmp(etag, want_hex, n);
}

/* ---- the S3 calls ---- */

/*
 * CreateMultipartUpload. `creating` says it is under way: an abort of every upload waits for
 * its UploadId to abort it, since the server may have made the upload already.
 */
static int create_upload(struct grist_upload *u)
{
	static const struct grist_sigv4_pair q[] = { { "uploads", "" } };
	struct grist_buf ans = { 0 };
	char id[sizeof(u->upload_id)];
	const char *v;
	size_t n;
	int ret;

	pthread_mutex_lock(&u->lock);
	ret = u->error ? grist_fail(u->error, "%s", u->msg) : 0;
	u->creating = !ret;
	pthread_mutex_unlock(&u->lock);
	if (ret)
		return ret;
	ret = request(u, "POST", q, 1, NULL, 0, NULL, &ans, NULL, 0, false);
	if (!ret && (!ans.len || !grist_xml_next((const char *)ans.data, (const char *)ans.data + ans.len, "UploadId",
						 &v, &n) || !n || n >= sizeof(id)))
		ret = grist_fail(-EPROTO, "%s: CreateMultipartUpload answered without an UploadId", u->url);
	if (!ret) {
		memcpy(id, v, n);
		id[n] = '\0';
		if (grist_xml_unescape(id))
			ret = grist_fail(-EPROTO, "%s: CreateMultipartUpload: a malformed UploadId", u->url);
	}
	grist_buf_free(&ans);
	pthread_mutex_lock(&u->lock);
	if (!ret)
		memcpy(u->upload_id, id, sizeof(id));
	u->creating = false;
	pthread_cond_broadcast(&u->cv);
	pthread_mutex_unlock(&u->lock);
	return ret;
}

static int abort_request(struct grist_upload *u)
{
	struct grist_sigv4_pair q[] = { { "uploadId", u->upload_id } };
	int ret;

	if (!u->upload_id[0])
		return 0;
	ret = request(u, "DELETE", q, 1, NULL, 0, NULL, NULL, NULL, 0, false);
	/* gone already (the server dropped it after a refused part): nothing is left, as wanted */
	return ret == -ENOENT || ret == -ESTALE ? 0 : ret;
}

static int put_part(struct grist_upload *u, unsigned no, const uint8_t *buf, size_t len, struct part *out)
{
	char num[16], want[33], etag[sizeof(out->etag)];
	struct grist_sigv4_pair q[] = { { "partNumber", num }, { "uploadId", u->upload_id } };
	unsigned char md5[16];
	int ret;

	snprintf(num, sizeof(num), "%u", no);
	md5_of(buf, len, md5);
	grist_hex(md5, 16, want);
	ret = request(u, "PUT", q, 2, buf, len, md5, NULL, etag, sizeof(etag), true);
	if (ret)
		return grist_fail(ret, "%s (part %u)", grist_last_error(), no);
	if (!etag[0] || !etag_matches(etag, want))
		return grist_fail(-EIO, "%s: part %u: the server's ETag %s is not the part's MD5 %s", u->url, no,
				  etag[0] ? etag : "(none)", want);
	memcpy(out->md5, md5, 16);
	snprintf(out->etag, sizeof(out->etag), "%s", etag);
	return 0;
}

/* ---- the sending threads ---- */

static void *sender(void *arg)
{
	struct grist_upload *u = arg;

	pthread_mutex_lock(&u->lock);
	for (;;) {
		struct part done = { 0 };
		uint8_t *buf;
		size_t i, len;
		int ret;

		while (!u->stop && u->next == u->nparts)
			pthread_cond_wait(&u->cv, &u->lock);
		if (u->next == u->nparts || u->error)
			break;
		i = u->next++;
		u->parts[i].sending = true;
		buf = u->parts[i].buf;
		len = u->parts[i].len;
		u->busy++;
		pthread_mutex_unlock(&u->lock);
		ret = put_part(u, (unsigned)i + 1, buf, len, &done);
		pthread_mutex_lock(&u->lock);
		u->busy--;
		memcpy(u->parts[i].md5, done.md5, sizeof(done.md5));
		memcpy(u->parts[i].etag, done.etag, sizeof(done.etag));
		u->parts[i].buf = NULL;
		u->parts[i].sending = false;
		u->pool[u->npool++] = buf;
		/*
		 * The lowest part's failure is the cause: a server that drops an upload after a refused
		 * part (rclone) answers the parts sent meanwhile NoSuchUpload, maybe before the refusal.
		 */
		if (ret && !__atomic_load_n(&u->cancel, __ATOMIC_ACQUIRE) && (!u->error || i < u->error_part)) {
			u->error = ret;
			u->error_part = i;
			snprintf(u->msg, sizeof(u->msg), "%s", grist_last_error());
		}
		pthread_cond_broadcast(&u->cv);
	}
	pthread_mutex_unlock(&u->lock);
	return NULL;
}

/*
 * The failure, as the caller's error (its message set again on the caller's thread), once
 * the parts before it have ended: one of them may be the cause. Bounded: a PUT ends within
 * its timeouts.
 */
static int failed(struct grist_upload *u)
{
	size_t i;
	int ret;

	pthread_mutex_lock(&u->lock);
	for (i = 0; i < u->error_part && i < u->nparts; i++)
		while (u->parts[i].sending)
			pthread_cond_wait(&u->cv, &u->lock);
	ret = grist_fail(u->error, "%s", u->msg);
	pthread_mutex_unlock(&u->lock);
	return ret;
}

int grist_upload_open(const char *url, struct grist_upload **out)
{
	struct grist_upload *u;
	pthread_condattr_t ca;
	char region[64];
	unsigned i;
	int ret;

	*out = NULL;
	if (grist_url_scheme(url) != GRIST_URL_S3 && grist_url_scheme(url) != GRIST_URL_GS)
		return grist_fail(-EINVAL, "%s: grist writes to s3:// and gs:// URLs only (http(s) has no upload)", url);
	ret = grist_remote_global_init();
	if (ret)
		return ret;
	u = calloc(1, sizeof(*u));
	if (!u)
		return grist_fail(-ENOMEM, "%s: out of memory", url);
	pthread_mutex_init(&u->lock, NULL);
	/* monotonic: grist_upload_abort_all() waits on it until a deadline of grist_remote_now_ns() */
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&u->cv, &ca);
	pthread_condattr_destroy(&ca);
	grist_remote_options_current(&u->opt);
	u->part_bytes = (size_t)u->opt.part_mib << 20;
	grist_remote_region(grist_url_scheme(url), region, sizeof(region));
	u->url = strdup(url);
	if (!u->url) {
		free(u);
		return grist_fail(-ENOMEM, "%s: out of memory", url);
	}
	ret = grist_url_parse(url, region, true, &u->u);
	if (!ret && u->u.key[strlen(u->u.key) - 1] == '/')
		ret = grist_fail(-EINVAL, "%s: names a folder, not an object", url);
	if (!ret)
		ret = grist_upload_live_add(u);
	if (ret)
		goto fail;
	u->pool = calloc(u->opt.upload_inflight + 1u, sizeof(*u->pool));
	u->threads = calloc(u->opt.upload_inflight, sizeof(*u->threads));
	if (!u->pool || !u->threads) {
		ret = grist_fail(-ENOMEM, "%s: out of memory", url);
		goto fail;
	}
	for (i = 0; i < u->opt.upload_inflight; i++) {
		if (grist_thread_start(&u->threads[i], sender, u))
			break;
		u->nthreads++;
	}
	if (!u->nthreads) {
		ret = grist_fail(-EAGAIN, "%s: cannot start an upload thread", url);
		goto fail;
	}
	*out = u;
	return 0;
fail:
	grist_upload_abort(u);
	return ret;
}

/* Hand the full part to the senders (starting the multipart upload at the first). */
static int send_fill(struct grist_upload *u)
{
	int ret;

	if (!u->upload_id[0]) {
		ret = create_upload(u);
		if (ret)
			return ret;
	}
	pthread_mutex_lock(&u->lock);
	if (u->nparts == 10000) {
		pthread_mutex_unlock(&u->lock);
		return grist_fail(-EFBIG, "%s: more than 10000 parts of %u MiB (raise the remote option part)", u->url,
				  u->opt.part_mib);
	}
	if (grist_array_reserve((void **)&u->parts, &u->parts_cap, u->nparts + 1, sizeof(*u->parts))) {
		pthread_mutex_unlock(&u->lock);
		return grist_fail(-ENOMEM, "%s: out of memory", u->url);
	}
	u->parts[u->nparts++] = (struct part){ .buf = u->fill, .len = u->fill_len };
	u->fill = NULL;
	u->fill_len = 0;
	pthread_cond_broadcast(&u->cv);
	pthread_mutex_unlock(&u->lock);
	return 0;
}

int grist_upload_write(struct grist_upload *u, const void *p, size_t n)
{
	const uint8_t *s = p;
	int ret;

	if (u->finished && n)
		return grist_fail(-EINVAL, "%s: written to after the upload was finished", u->url);
	while (n) {
		size_t take;

		if (!u->fill) {
			pthread_mutex_lock(&u->lock);
			while (!u->npool && u->nbufs > u->opt.upload_inflight && !u->error)
				pthread_cond_wait(&u->cv, &u->lock);
			if (u->error) {
				pthread_mutex_unlock(&u->lock);
				return failed(u);
			}
			if (u->npool) {
				u->fill = u->pool[--u->npool];
			} else {
				u->fill = malloc(u->part_bytes);
				u->nbufs += u->fill != NULL;
			}
			pthread_mutex_unlock(&u->lock);
			if (!u->fill)
				return grist_fail(-ENOMEM, "%s: out of memory for a part of %zu bytes", u->url, u->part_bytes);
		}
		take = u->part_bytes - u->fill_len < n ? u->part_bytes - u->fill_len : n;
		memcpy(u->fill + u->fill_len, s, take);
		u->fill_len += take;
		u->total += take;
		s += take;
		n -= take;
		if (u->fill_len == u->part_bytes) {
			ret = send_fill(u);
			if (ret)
				return ret;
		}
	}
	return 0;
}

uint64_t grist_upload_bytes(const struct grist_upload *u)
{
	return u->total;
}

int grist_upload_finish(struct grist_upload *u)
{
	unsigned i;
	int ret = 0;

	/*
	 * What is left goes as the last part; an object of less than PUT_MAX in all waits for
	 * commit in memory and is one PutObject then. A finished writer may wait long for its
	 * commit (convert commits every shard at the end), so it keeps no more than that.
	 */
	u->finished = true;
	if (u->fill_len && (u->upload_id[0] || u->fill_len >= PUT_MAX))
		ret = send_fill(u);
	if (ret)
		return ret;
	pthread_mutex_lock(&u->lock);
	while (!u->error && (u->busy || u->next < u->nparts))
		pthread_cond_wait(&u->cv, &u->lock);
	ret = u->error;
	/* every part is sent: the part buffers go (64 shards waiting for commit would keep 5 GiB) */
	for (i = 0; !u->busy && i < u->npool; i++)
		free(u->pool[i]);
	if (!u->busy) {
		u->nbufs -= u->npool;
		u->npool = 0;
	}
	pthread_mutex_unlock(&u->lock);
	if (u->fill && u->fill_len < u->part_bytes) {
		uint8_t *small = realloc(u->fill, u->fill_len ? u->fill_len : 1);

		if (small)
			u->fill = small;
	}
	return ret ? failed(u) : 0;
}

/* CompleteMultipartUpload; its answer's ETag must be the MD5 of the parts' MD5s, "-N". */
static int complete(struct grist_upload *u, char *etag, size_t cap)
{
	struct grist_sigv4_pair q[] = { { "uploadId", u->upload_id } };
	struct grist_buf body = { 0 }, ans = { 0 };
	unsigned char *all = malloc(16 * u->nparts + 1), sum[16];
	char want[48], line[360];
	const char *v;
	size_t i, n;
	int ret = 0;

	if (!all)
		return grist_fail(-ENOMEM, "%s: out of memory", u->url);
	/* aborted meanwhile (grist_upload_abort_all()): not made visible */
	pthread_mutex_lock(&u->lock);
	ret = u->error ? grist_fail(u->error, "%s", u->msg) : 0;
	pthread_mutex_unlock(&u->lock);
	if (ret) {
		free(all);
		return ret;
	}
	ret = grist_buf_append(&body, "<CompleteMultipartUpload>", 25) ? -ENOMEM : 0;
	for (i = 0; !ret && i < u->nparts; i++) {
		snprintf(line, sizeof(line), "<Part><PartNumber>%zu</PartNumber><ETag>%.255s</ETag></Part>", i + 1,
			 u->parts[i].etag);
		ret = grist_buf_append(&body, line, strlen(line)) ? -ENOMEM : 0;
		memcpy(all + 16 * i, u->parts[i].md5, 16);
	}
	if (!ret)
		ret = grist_buf_append(&body, "</CompleteMultipartUpload>", 26) ? -ENOMEM : 0;
	if (ret) {
		ret = grist_fail(-ENOMEM, "%s: out of memory", u->url);
		goto out;
	}
	ret = request(u, "POST", q, 1, body.data, body.len, NULL, &ans, NULL, 0, false);
	if (ret)
		goto out;
	/* S3 may answer 200 and put the failure in the body */
	if (ans.data && ans.len && memmem(ans.data, ans.len, "<Error>", 7)) {
		ret = grist_fail(-EIO, "%s: CompleteMultipartUpload failed: %.*s", u->url,
				 (int)(ans.len < 300 ? ans.len : 300), (const char *)ans.data);
		goto out;
	}
	if (!ans.len || !grist_xml_next((const char *)ans.data, (const char *)ans.data + ans.len, "ETag", &v, &n) ||
	    n >= cap) {
		ret = grist_fail(-EPROTO, "%s: CompleteMultipartUpload answered without an ETag", u->url);
		goto out;
	}
	memcpy(etag, v, n);
	etag[n] = '\0';
	grist_xml_unescape(etag);
	md5_of(all, 16 * u->nparts, sum);
	grist_hex(sum, 16, want);
	snprintf(want + 32, sizeof(want) - 32, "-%zu", u->nparts);
	if (!etag_matches(etag, want))
		ret = grist_fail(-EIO, "%s: the completed object's ETag %s is not that of the parts sent (%s)", u->url, etag,
				 want);
out:
	free(all);
	grist_buf_free(&body);
	grist_buf_free(&ans);
	return ret;
}

/* The text of <@tag> inside [@p, @end), unescaped, into @out; "" when absent. */
static void field(const char *p, const char *end, const char *tag, char *out, size_t cap)
{
	const char *v;
	size_t n;

	out[0] = '\0';
	if (grist_xml_next(p, end, tag, &v, &n) && n < cap) {
		memcpy(out, v, n);
		out[n] = '\0';
		if (grist_xml_unescape(out))
			out[0] = '\0';
	}
}

/* Two ETags the same, their quotes aside. */
static bool same_etag(const char *a, const char *b)
{
	size_t na, nb;

	a += *a == '"';
	b += *b == '"';
	na = strlen(a) - (strlen(a) && a[strlen(a) - 1] == '"');
	nb = strlen(b) - (strlen(b) && b[strlen(b) - 1] == '"');
	return na == nb && !strncasecmp(a, b, na);
}

/*
 * ListParts before CompleteMultipartUpload: the server's own account of every part, its
 * number, size and ETag, must be what was sent, so the object made visible is the bytes
 * written, its size checked without reading it back (rclone hashes a whole object to answer
 * any GET of it: a second pass over the upload).
 */
static int list_parts(struct grist_upload *u)
{
	char marker[24] = "0", text[256];
	struct grist_sigv4_pair q[] = { { "max-parts", "200" }, { "part-number-marker", marker },
					{ "uploadId", u->upload_id } };
	uint64_t sum = 0;
	size_t seen = 0;
	int ret = 0;

	for (;;) {
		struct grist_buf ans = { 0 };
		const char *p, *end, *v;
		size_t n;
		bool more;

		ret = request(u, "GET", q, 3, NULL, 0, NULL, &ans, NULL, 0, false);
		if (ret) {
			grist_buf_free(&ans);
			return ret;
		}
		p = (const char *)ans.data;
		end = p + ans.len;
		while (!ret && ans.len && (p = grist_xml_next(p, end, "Part", &v, &n))) {
			unsigned long long no, size;

			field(v, v + n, "PartNumber", text, sizeof(text));
			no = strtoull(text, NULL, 10);
			field(v, v + n, "Size", text, sizeof(text));
			size = strtoull(text, NULL, 10);
			field(v, v + n, "ETag", text, sizeof(text));
			if (seen >= u->nparts || no != seen + 1 || size != u->parts[seen].len ||
			    !same_etag(text, u->parts[seen].etag))
				ret = grist_fail(-EIO, "%s: the server lists part %llu as %llu bytes, ETag %s; grist sent "
						 "part %zu, %zu bytes, ETag %s", u->url, no, size, text, seen + 1,
						 seen < u->nparts ? u->parts[seen].len : 0,
						 seen < u->nparts ? u->parts[seen].etag : "-");
			sum += size;
			seen++;
		}
		field((const char *)ans.data, (const char *)ans.data + ans.len, "IsTruncated", text, sizeof(text));
		more = !strcmp(text, "true");
		field((const char *)ans.data, (const char *)ans.data + ans.len, "NextPartNumberMarker", marker,
		      sizeof(marker));
		grist_buf_free(&ans);
		if (ret || !more)
			break;
		if (!marker[0])
			return grist_fail(-EPROTO, "%s: ListParts is truncated but names no next marker", u->url);
	}
	if (!ret && (seen != u->nparts || sum != u->total))
		ret = grist_fail(-EIO, "%s: the server holds %zu parts of %llu bytes in all; grist sent %zu parts of "
				 "%llu bytes", u->url, seen, (unsigned long long)sum, u->nparts,
				 (unsigned long long)u->total);
	return ret;
}

/* Read the object back (its last 64 KiB): its size must be the bytes written. */
static int check_object(struct grist_upload *u)
{
	struct grist_remote_object *o;
	int ret;

	ret = grist_remote_open(u->url, &o);
	if (ret)
		return grist_fail(ret, "%s: written, but cannot be read back: %s", u->url, grist_last_error());
	if (o->size != u->total)
		ret = grist_fail(-EIO, "%s: written %llu bytes, the object has %llu", u->url,
				 (unsigned long long)u->total, (unsigned long long)o->size);
	grist_remote_unref(o);
	return ret;
}

static void upload_free(struct grist_upload *u)
{
	size_t i;

	pthread_mutex_lock(&u->lock);
	u->stop = true;
	pthread_cond_broadcast(&u->cv);
	pthread_mutex_unlock(&u->lock);
	for (i = 0; i < u->nthreads; i++)
		pthread_join(u->threads[i], NULL);
	grist_upload_live_remove(u);
	for (i = 0; i < u->npool; i++)
		free(u->pool[i]);
	for (i = 0; i < u->nparts; i++)
		free(u->parts[i].buf);
	free(u->fill);
	free(u->pool);
	free(u->threads);
	free(u->parts);
	grist_url_free(&u->u);
	pthread_mutex_destroy(&u->lock);
	pthread_cond_destroy(&u->cv);
	free(u->url);
	free(u);
}

int grist_upload_commit(struct grist_upload *u)
{
	char etag[256];
	int ret;

	ret = grist_upload_finish(u);
	if (!ret && !u->upload_id[0]) {
		unsigned char md5[16];
		char want[33];

		md5_of(u->fill ? u->fill : (const uint8_t *)"", u->fill_len, md5);
		grist_hex(md5, 16, want);
		ret = request(u, "PUT", NULL, 0, u->fill ? u->fill : (const uint8_t *)"", u->fill_len, md5, NULL, etag,
			      sizeof(etag), true);
		if (!ret && etag[0] && !etag_matches(etag, want))
			ret = grist_fail(-EIO, "%s: the server's ETag %s is not the object's MD5 %s", u->url, etag, want);
		/* an ETag that is the MD5 proves the bytes; another kind (SSE-KMS) is checked by reading back */
		if (!ret && !same_etag(etag, want))
			ret = check_object(u);
		upload_free(u);
		return ret;
	}
	if (!ret)
		ret = list_parts(u);
	if (!ret)
		ret = complete(u, etag, sizeof(etag));
	if (ret) {
		grist_upload_abort(u);
		return ret;
	}
	upload_free(u);
	return 0;
}

void grist_upload_abort(struct grist_upload *u)
{
	char msg[1024];

	if (!u)
		return;
	/* the caller's error stays the one reported */
	snprintf(msg, sizeof(msg), "%s", grist_last_error());
	__atomic_store_n(&u->cancel, 1, __ATOMIC_RELEASE);
	pthread_mutex_lock(&u->lock);
	u->stop = true;
	if (!u->error)
		u->error = -ECANCELED;
	pthread_cond_broadcast(&u->cv);
	pthread_mutex_unlock(&u->lock);
	for (unsigned i = 0; i < u->nthreads; i++)
		pthread_join(u->threads[i], NULL);
	u->nthreads = 0;
	/*
	 * The server gone (often the error that stopped the upload) fails the abort too: the
	 * parts stay, billed, until someone aborts the upload. Callers have taken their error's
	 * message by now (and an abort of the caller's own has none), so this goes to the log.
	 */
	if (abort_request(u))
		grist_log(GRIST_LOG_ERROR, "%s: the upload could not be aborted (AbortMultipartUpload: %s): its "
			  "parts stay at the server until it is aborted (UploadId %s)", u->url, grist_last_error(),
			  u->upload_id);
	upload_free(u);
	grist_fail(-ECANCELED, "%s", msg);
}

GRIST_API int grist_remote_put(const char *url, const void *data, size_t len)
{
	struct grist_upload *u;
	int ret;

	ret = grist_upload_open(url, &u);
	if (ret)
		return ret;
	ret = grist_upload_write(u, data, len);
	if (ret) {
		grist_upload_abort(u);
		return ret;
	}
	return grist_upload_commit(u);
}

GRIST_API int grist_remote_delete(const char *url)
{
	struct grist_upload u;
	char region[64];
	int ret;

	memset(&u, 0, sizeof(u));
	u.url = (char *)url;
	grist_remote_options_current(&u.opt);
	grist_remote_region(grist_url_scheme(url), region, sizeof(region));
	ret = grist_url_parse(url, region, true, &u.u);
	if (!ret)
		ret = request(&u, "DELETE", NULL, 0, NULL, 0, NULL, NULL, NULL, 0, false);
	grist_url_free(&u.u);
	return ret;
}
