/*
 * grist_convert() from csv: RFC 4180 rows into tf.train.Example records, typed by the
 * features spec (grammar in grist/convert.h; parsed here, in spec_parse(), and nowhere
 * else). Plain or GZIP text through the shared byte source. Fields are copied out of the
 * stream as they are unquoted, so a record may span any number of buffer fills.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "grist/features.h"
#include "common/buf.h"
#include "common/error.h"
#include "convert/input.h"

/* A row longer than this is an error, not an allocation. */
#define ROW_MAX_BYTES ((size_t)1 << 30)

enum csv_type { CSV_INT64, CSV_FLOAT32, CSV_TEXT };

struct csv_col {
	char *name;
	enum csv_type type;
	bool list;      /* "[]": the cell's values split at spaces */
	size_t field;   /* its place in the header */
};

static void spec_free(struct csv_col *cols, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(cols[i].name);
	free(cols);
}

/* The one parser of the features spec: "name:type[,name:type...]", type int64|float32|text, "[]" for lists. */
static int spec_parse(const char *spec, struct csv_col **out, size_t *count)
{
	static const char *const types[] = { [CSV_INT64] = "int64", [CSV_FLOAT32] = "float32", [CSV_TEXT] = "text" };
	struct csv_col *cols = NULL;
	size_t n = 0, cap = 0;
	const char *p = spec;
	int ret = 0;

	if (!spec || !*spec)
		return grist_fail(-EINVAL, "csv: a features spec is needed, e.g. 'age:int64,score:float32,name:text,"
				  "tags:text[]'");
	while (!ret) {
		const char *end = strchr(p, ','), *colon;
		size_t len = end ? (size_t)(end - p) : strlen(p), tlen;
		struct csv_col *c;
		size_t t;

		colon = memchr(p, ':', len);
		if (!colon || colon == p) {
			ret = grist_fail(-EINVAL, "features: '%.*s' is not NAME:TYPE (TYPE int64, float32 or text, "
					 "with [] for a list)", (int)len, p);
			break;
		}
		if ((ret = grist_array_reserve((void **)&cols, &cap, n + 1, sizeof(*cols))))
			break;
		c = &cols[n];
		*c = (struct csv_col){ .name = strndup(p, (size_t)(colon - p)) };
		if (!c->name) {
			ret = grist_fail(-ENOMEM, "out of memory");
			break;
		}
		n++;
		tlen = len - (size_t)(colon + 1 - p);
		if (tlen > 2 && !memcmp(colon + 1 + tlen - 2, "[]", 2)) {
			c->list = true;
			tlen -= 2;
		}
		for (t = 0; t < sizeof(types) / sizeof(types[0]); t++)
			if (strlen(types[t]) == tlen && !memcmp(colon + 1, types[t], tlen))
				break;
		if (t == sizeof(types) / sizeof(types[0])) {
			ret = grist_fail(-EINVAL, "features: column '%s': unknown type '%.*s' (int64, float32, text, "
					 "each with [] for a list)", c->name, (int)tlen, colon + 1);
			break;
		}
		c->type = (enum csv_type)t;
		for (size_t i = 0; i + 1 < n; i++)
			if (!strcmp(cols[i].name, c->name))
				ret = grist_fail(-EINVAL, "features: column '%s' is named twice", c->name);
		if (!end)
			break;
		p = end + 1;
	}
	if (ret) {
		spec_free(cols, n);
		return ret;
	}
	*out = cols;
	*count = n;
	return 0;
}

int grist_csv_spec_check(const char *spec)
{
	struct csv_col *cols;
	size_t n;
	int ret = spec_parse(spec, &cols, &n);

	if (!ret)
		spec_free(cols, n);
	return ret;
}

struct csv {
	struct grist_input_source s;
	struct csv_col *cols;
	size_t ncols, nfields;  /* spec columns; fields of the header */
	struct grist_buf fb;    /* the record's fields, unquoted, each NUL-terminated */
	size_t *at;             /* field i is fb[at[i], at[i + 1] - 1) */
	size_t nf, at_cap;
	uint64_t line;          /* the line the stream is on (1-based) */
	uint64_t rec_line;      /* the line the record started on */
	struct grist_example_encoder *enc;
	void *vals;             /* int64 or float values of a column */
	size_t vals_cap;
	uint64_t *offs;         /* a text list's offsets */
	size_t offs_cap;
};

static int put(struct csv *c, uint8_t ch)
{
	if (c->fb.len >= ROW_MAX_BYTES)
		return grist_fail(-EBADMSG, "%s: line %llu: a row longer than %zu bytes", c->s.path,
				  (unsigned long long)c->rec_line, ROW_MAX_BYTES);
	if (c->fb.len == c->fb.cap && grist_buf_reserve(&c->fb, c->fb.len + 1))
		return grist_fail(-ENOMEM, "out of memory");
	c->fb.data[c->fb.len++] = ch;
	return 0;
}

/* Close the field being read: NUL-terminate it and note where the next one starts. */
static int end_field(struct csv *c)
{
	int ret = put(c, '\0');

	if (!ret)
		ret = grist_array_reserve((void **)&c->at, &c->at_cap, c->nf + 2, sizeof(*c->at));
	if (!ret)
		c->at[++c->nf] = c->fb.len;
	return ret;
}

/*
 * The next record's fields into c->fb / c->at: 1, 0 at the end of the file, or a negative
 * errno. Blank lines are skipped; CRLF and LF both end a record; inside quotes anything
 * goes, "" being one quote.
 */
static int read_record(struct csv *c)
{
	enum { START, PLAIN, QUOTED, CLOSED } st = START;
	struct grist_input_source *s = &c->s;
	bool quoted = false; /* the current field was quoted */
	int ret = 0;

	c->fb.len = 0;
	c->nf = 0;
	if ((ret = grist_array_reserve((void **)&c->at, &c->at_cap, 2, sizeof(*c->at))))
		return ret;
	c->at[0] = 0;
	c->rec_line = c->line;
	for (;;) {
		uint8_t ch;

		if (s->start == s->end) {
			int64_t have = grist_input_source_fill(s, 1);

			if (have < 0)
				return (int)have;
			if (!have) {
				if (st == QUOTED)
					return grist_fail(-EBADMSG, "%s: line %llu: a quoted field is not closed before the "
							  "end of the file", s->path, (unsigned long long)c->rec_line);
				if (!c->nf && c->fb.len == c->at[0] && st == START)
					return 0;
				if (st == PLAIN && c->fb.len > c->at[c->nf] && c->fb.data[c->fb.len - 1] == '\r')
					c->fb.len--;
				return end_field(c) ? -ENOMEM : 1;
			}
		}
		ch = s->buf[s->start];
		grist_input_source_consume(s, 1);
		switch (st) {
		case START:
			if (ch == '"') {
				st = QUOTED;
				quoted = true;
				continue;
			}
			quoted = false;
			/* fall through */
		case PLAIN:
			if (ch == ',') {
				ret = end_field(c);
				st = START;
			} else if (ch == '\n') {
				size_t flen = c->fb.len - c->at[c->nf];

				c->line++;
				if (flen && c->fb.data[c->fb.len - 1] == '\r')
					c->fb.len--, flen--;
				if (!c->nf && !flen && !quoted) { /* a blank line */
					c->rec_line = c->line;
					st = START;
					continue;
				}
				return end_field(c) ? -ENOMEM : 1;
			} else {
				ret = put(c, ch);
				st = PLAIN;
			}
			break;
		case QUOTED:
			if (ch == '"') {
				st = CLOSED;
			} else {
				c->line += ch == '\n';
				ret = put(c, ch);
			}
			break;
		case CLOSED:
			if (ch == '"') {
				ret = put(c, '"');
				st = QUOTED;
			} else if (ch == ',') {
				ret = end_field(c);
				st = START;
			} else if (ch == '\n') {
				c->line++;
				return end_field(c) ? -ENOMEM : 1;
			} else if (ch != '\r') {
				return grist_fail(-EBADMSG, "%s: line %llu, field %zu: '%c' after a closing quote (a quote "
						  "inside a quoted field is written \"\")", s->path,
						  (unsigned long long)c->line, c->nf + 1, ch >= 0x20 && ch < 0x7f ? ch : '?');
			}
			break;
		}
		if (ret)
			return ret;
	}
}

static char *field(struct csv *c, size_t i, size_t *len)
{
	*len = c->at[i + 1] - c->at[i] - 1;
	return (char *)c->fb.data + c->at[i];
}

static void csv_close(struct grist_input *in)
{
	struct csv *c = in->priv;

	if (!c)
		return;
	grist_input_source_close(&c->s);
	spec_free(c->cols, c->ncols);
	grist_buf_free(&c->fb);
	grist_example_encoder_destroy(c->enc);
	free(c->at);
	free(c->vals);
	free(c->offs);
	free(c);
	in->priv = NULL;
}

/* Open the file, read its header and find every spec column in it. */
static int csv_open(struct grist_input *in, const char *path)
{
	struct csv *c = calloc(1, sizeof(*c));
	int ret;

	if (!c)
		return grist_fail(-ENOMEM, "cannot allocate an input");
	in->priv = c;
	c->line = 1;
	c->s.fd = -1;
	ret = spec_parse(in->features, &c->cols, &c->ncols);
	if (!ret)
		ret = grist_example_encoder_create(&c->enc);
	if (!ret && (ret = grist_input_source_open(&c->s, path)))
		c->s = (struct grist_input_source){ .fd = -1 }; /* it released what it took */
	if (ret)
		goto fail;
	/* A UTF-8 byte order mark (spreadsheets write one) is no part of the first name. */
	if ((ret = (int)grist_input_source_fill(&c->s, 3)) < 0)
		goto fail;
	if (ret >= 3 && !memcmp(c->s.buf + c->s.start, "\xef\xbb\xbf", 3))
		grist_input_source_consume(&c->s, 3);
	ret = read_record(c);
	if (ret <= 0) {
		if (!ret)
			ret = grist_fail(-EBADMSG, "%s: no header row (csv needs one naming the columns)", path);
		goto fail;
	}
	c->nfields = c->nf;
	for (size_t j = 0; j < c->ncols; j++) {
		size_t hits = 0, len;

		for (size_t i = 0; i < c->nf; i++)
			if (!strcmp(field(c, i, &len), c->cols[j].name))
				c->cols[j].field = i, hits++;
		if (hits != 1) {
			ret = grist_fail(-EINVAL, "%s: line %llu: the header %s column '%s' (the features spec names it)",
					 path, (unsigned long long)c->rec_line, hits ? "has more than one" : "has no",
					 c->cols[j].name);
			goto fail;
		}
	}
	return 0;
fail:
	csv_close(in);
	return ret;
}

static bool space(char ch)
{
	return ch == ' ' || ch == '\t' || ch == '\r' || ch == '\n' || ch == '\v' || ch == '\f';
}

/* The next space-separated token of *@p (NUL-terminated in place), or NULL when none is left. */
static char *token(char **p)
{
	char *t = *p, *e;

	while (space(*t))
		t++;
	if (!*t)
		return NULL;
	for (e = t; *e && !space(*e); e++)
		;
	*p = *e ? e + 1 : e;
	*e = '\0';
	return t;
}

static int bad_cell(struct csv *c, const struct csv_col *col, const char *text)
{
	return grist_fail(-EBADMSG, "%s: line %llu, column '%s': %s'%.60s' is not %s", c->s.path,
			  (unsigned long long)c->rec_line, col->name, *text ? "" : "an empty cell ", text,
			  col->type == CSV_INT64 ? "an int64" : "a float32");
}

/* @s whole as value @i of @vals (int64 or float): false when it is not one, or out of range. */
static bool parse_number(enum csv_type type, const char *s, void *vals, size_t i)
{
	char *end;

	errno = 0;
	if (type == CSV_INT64)
		((int64_t *)vals)[i] = strtoll(s, &end, 10);
	else
		((float *)vals)[i] = strtof(s, &end);
	return end != s && !*end && !(errno && type == CSV_INT64) && !space(*s);
}

/* One spec column's cell into the encoder. */
static int encode_cell(struct csv *c, const struct csv_col *col)
{
	size_t len, n = 0, cap_need;
	char *cell = field(c, col->field, &len), *p = cell, *tok;
	int ret;

	if (col->type == CSV_TEXT && !col->list)
		return grist_example_add_bytes(c->enc, col->name, (const uint8_t *)cell, (const uint64_t[]){ 0, len }, 1);
	cap_need = len / 2 + 2; /* tokens are at least one byte plus a space */
	if (col->type == CSV_TEXT) {
		if ((ret = grist_array_reserve((void **)&c->offs, &c->offs_cap, cap_need * 2 + 1, sizeof(uint64_t))))
			return ret;
		/* offsets in pairs: a token's start and end, turned into runs below */
		while ((tok = token(&p))) {
			c->offs[2 * n] = (uint64_t)(tok - cell);
			c->offs[2 * n + 1] = (uint64_t)(tok - cell) + strlen(tok);
			n++;
		}
		/* add_bytes wants values back to back: pack the tokens, which only move left */
		{
			size_t w = 0;
			uint64_t *o = c->offs;

			for (size_t i = 0; i < n; i++) {
				size_t tl = (size_t)(o[2 * i + 1] - o[2 * i]);

				memmove(cell + w, cell + o[2 * i], tl);
				o[i] = w;
				w += tl;
			}
			o[n] = w;
		}
		return grist_example_add_bytes(c->enc, col->name, (const uint8_t *)cell, c->offs, n);
	}
	if ((ret = grist_array_reserve(&c->vals, &c->vals_cap, cap_need, 8)))
		return ret;
	if (!col->list) {
		/* one number, spaces around it allowed: the cell whole is what an error quotes */
		while (space(*p))
			p++;
		for (size_t e = strlen(p); e && space(p[e - 1]); e--)
			p[e - 1] = '\0';
		if (!parse_number(col->type, p, c->vals, 0))
			return bad_cell(c, col, p);
		n = 1;
	} else {
		while ((tok = token(&p))) {
			if (!parse_number(col->type, tok, c->vals, n))
				return bad_cell(c, col, tok);
			n++;
		}
	}
	if (col->type == CSV_INT64)
		return grist_example_add_int64s(c->enc, col->name, c->vals, n);
	return grist_example_add_floats(c->enc, col->name, c->vals, n);
}

static int csv_next(struct grist_input *in, const uint8_t **data, size_t *len)
{
	struct csv *c = in->priv;
	int ret = read_record(c);

	if (ret <= 0)
		return ret;
	if (c->nf != c->nfields)
		return grist_fail(-EBADMSG, "%s: line %llu: %zu fields, the header has %zu", c->s.path,
				  (unsigned long long)c->rec_line, c->nf, c->nfields);
	grist_example_begin(c->enc);
	for (size_t j = 0; j < c->ncols; j++)
		if ((ret = encode_cell(c, &c->cols[j])))
			return ret;
	ret = grist_example_finish(c->enc, data, len);
	if (ret)
		return grist_fail_prefix(ret, "%s: line %llu", c->s.path, (unsigned long long)c->rec_line);
	in->record++;
	return 1;
}

static uint64_t csv_done_bytes(const struct grist_input *in)
{
	return grist_input_source_disk_offset(&((const struct csv *)in->priv)->s);
}

const struct grist_input_ops grist_input_csv_ops = {
	.name = "csv",
	.open = csv_open,
	.next = csv_next,
	.done_bytes = csv_done_bytes,
	.close = csv_close,
};
