/*
 * HTTP redirects of the remote backend's GETs (301, 302, 303, 307, 308), followed by grist
 * rather than by libcurl, because what to send where is the point:
 *
 * - Credentials never leave the original host. A hop to another host is a plain http(s)
 *   URL: no Authorization, no x-amz-* header (a CDN or a presigned target carries its own
 *   authority in its query). A hop on the same host keeps the signature scheme, signed
 *   for its own path, unless it carries a query (a presigned URL): then it goes as it is.
 * - At most `redirects` hops (the remote option), and never back to a URL of the chain:
 *   both fail with -ELOOP naming every URL followed.
 * - The URL a redirect led to is the object's target: later GETs of the object (its ranged
 *   reads, on any thread) go straight there, with the ETag pinned at open as If-Match.
 * - A target that worked and now answers 401 or 403 (a signed URL that expired) is
 *   resolved again from the original URL, as an attempt of the GET (bounded by retries).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/error.h"
#include "io/io.h"
#include "io/remote.h"

static struct grist_remote_object *dest(const struct grist_remote_xfer *x)
{
	return x->dest ? x->dest : x->obj;
}

const struct grist_url *grist_redirect_pick(struct grist_remote_xfer *x)
{
	struct grist_remote_object *o = dest(x);
	struct grist_remote_target *t;

	x->at_target = false;
	if (x->hop) /* following a chain: its last hop */
		return x->at = &x->hop->u;
	t = o && !x->from_origin ? __atomic_load_n(&o->target, __ATOMIC_ACQUIRE) : NULL;
	if (t) {
		x->at_target = true;
		return x->at = &t->u;
	}
	return x->at = x->u;
}

static void free_chain(struct grist_remote_target *t)
{
	while (t) {
		struct grist_remote_target *n = t->next;

		grist_url_free(&t->u);
		free(t->text);
		free(t);
		t = n;
	}
}

void grist_redirect_free_targets(struct grist_remote_target *t)
{
	free_chain(t);
}

void grist_redirect_release(struct grist_remote_xfer *x)
{
	free_chain(x->hop);
	x->hop = NULL;
	x->hops = 0;
}

/* The URL text of @u as requested (endpoint and path). */
static int url_text(const struct grist_url *u, struct grist_buf *b)
{
	b->len = 0;
	return grist_buf_append(b, u->endpoint, strlen(u->endpoint)) || grist_buf_append(b, u->path, strlen(u->path)) ||
			       grist_buf_append(b, "", 1)
		       ? -ENOMEM
		       : 0;
}

/* "A -> B -> C": the chain from u to the hop about to be taken (@next), for messages. */
static void chain_text(const struct grist_remote_xfer *x, const char *next, char *out, size_t cap)
{
	const struct grist_remote_target *t, *order[64];
	size_t n = 0, at, i;

	at = (size_t)snprintf(out, cap, "%s", x->display);
	for (t = x->hop; t && n < 64; t = t->next)
		order[n++] = t;
	for (i = n; i-- > 0 && at < cap;)
		at += (size_t)snprintf(out + at, cap - at, " -> %s", order[i]->text);
	if (at < cap)
		snprintf(out + at, cap - at, " -> %s", next);
}

static int fail_x(struct grist_remote_xfer *x, int code, const char *what, const char *next)
{
	char chain[sizeof(x->msg) - 160];

	/* the chain after what went wrong: a long chain is cut at its end, the message kept */
	chain_text(x, next, chain, sizeof(chain));
	snprintf(x->msg, sizeof(x->msg), "HTTP %ld: %.120s: %s", x->status, what, chain);
	x->error = code;
	return -1;
}

/* @loc resolved against @base (RFC 3986 section 5.2, the forms servers send): into @out. */
static int resolve(const struct grist_url *base, const char *loc, struct grist_buf *out)
{
	const char *slash;

	out->len = 0;
	if (!strncasecmp(loc, "http://", 7) || !strncasecmp(loc, "https://", 8))
		return grist_buf_append(out, loc, strlen(loc) + 1) ? -ENOMEM : 0;
	if (loc[0] == '/' && loc[1] == '/') /* scheme-relative */
		return grist_buf_append(out, base->tls ? "https:" : "http:", base->tls ? 6 : 5) ||
				       grist_buf_append(out, loc, strlen(loc) + 1)
			       ? -ENOMEM
			       : 0;
	if (grist_buf_append(out, base->endpoint, strlen(base->endpoint)))
		return -ENOMEM;
	if (loc[0] == '/')
		return grist_buf_append(out, loc, strlen(loc) + 1) ? -ENOMEM : 0;
	/* relative to the base path's folder (its query dropped) */
	slash = NULL;
	for (const char *p = base->path; *p && *p != '?'; p++)
		if (*p == '/')
			slash = p;
	if (slash && grist_buf_append(out, base->path, (size_t)(slash - base->path)))
		return -ENOMEM;
	return grist_buf_append(out, "/", 1) || grist_buf_append(out, loc, strlen(loc) + 1) ? -ENOMEM : 0;
}

int grist_redirect_follow(struct grist_remote_xfer *x)
{
	const struct grist_url *from = x->at ? x->at : x->u;
	struct grist_buf next = { 0 }, seen = { 0 };
	struct grist_remote_target *t, *h;
	char region[64];
	int ret;

	if (!x->location[0])
		return fail_x(x, -EPROTO, "a redirect without a Location header", "?");
	if (x->location_long)
		return fail_x(x, -EPROTO, "a redirect whose Location is longer than 4 KiB", "?");
	if (resolve(from, x->location, &next)) {
		grist_buf_free(&next);
		return fail_x(x, -ENOMEM, "out of memory following a redirect", x->location);
	}
	if (x->hops >= x->opt->redirects) {
		char what[64];

		snprintf(what, sizeof(what), "more than %u redirects (remote option redirects)", x->opt->redirects);
		ret = fail_x(x, -ELOOP, what, (const char *)next.data);
		grist_buf_free(&next);
		return ret;
	}
	/* a loop: the next URL is the original or one already followed */
	ret = url_text(x->u, &seen);
	for (h = x->hop; !ret; h = h->next) {
		if (!strcmp((const char *)seen.data, (const char *)next.data)) {
			ret = fail_x(x, -ELOOP, "a redirect loop", (const char *)next.data);
			break;
		}
		if (!h)
			break;
		ret = url_text(&h->u, &seen);
	}
	grist_buf_free(&seen);
	if (ret) {
		grist_buf_free(&next);
		return ret == -ENOMEM ? fail_x(x, -ENOMEM, "out of memory following a redirect", x->location) : -1;
	}
	t = calloc(1, sizeof(*t));
	if (!t) {
		grist_buf_free(&next);
		return fail_x(x, -ENOMEM, "out of memory following a redirect", x->location);
	}
	t->text = (char *)next.data;
	grist_remote_region(x->u->scheme, region, sizeof(region));
	if (grist_url_parse(t->text, region, false, &t->u) || t->u.scheme != GRIST_URL_HTTP) {
		char what[120];

		snprintf(what, sizeof(what), "a redirect to a URL grist cannot follow (%.70s)", grist_last_error());
		free(t->text);
		free(t);
		return fail_x(x, -EPROTO, what, x->location);
	}
	/* credentials stay on the original host: same host, no query of its own, then signed */
	if (x->u->scheme != GRIST_URL_HTTP && !strcmp(t->u.host, x->u->host) && t->u.tls == x->u->tls &&
	    !strchr(t->u.path, '?'))
		t->u.scheme = x->u->scheme;
	t->next = x->hop;
	x->hop = t;
	x->hops++;
	return 0;
}

void grist_redirect_arrived(struct grist_remote_xfer *x)
{
	struct grist_remote_object *o = dest(x);
	struct grist_remote_target *t = x->hop, *old;

	x->from_origin = false;
	if (!t)
		return;
	/* keep only the last hop: it is where the object is */
	free_chain(t->next);
	t->next = NULL;
	x->hop = NULL;
	x->hops = 0;
	if (!o) {
		free_chain(t);
		return;
	}
	/* publish it; the old targets stay (another thread may be reading one) until the object goes */
	old = __atomic_load_n(&o->target, __ATOMIC_ACQUIRE);
	do
		t->next = old;
	while (!__atomic_compare_exchange_n(&o->target, &old, t, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE));
}
