/* A tiktoken ranks file: "<base64 token> <rank>" lines -> the bytes <-> rank tables of BPE. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "common/error.h"
#include "common/open.h"
#include "text/text_internal.h"

/* Ranks files of real vocabularies are a few MB; this bounds a wrong path's allocation. */
#define RANKS_FILE_MAX (1ull << 30)
#define RANK_MAX ((1u << 31) - 1)
#define TOKEN_LEN_MAX 0xffff

static int b64_value(uint8_t c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

/*
 * Strict standard base64 with padding, as Python's b64decode accepts it from these files:
 * a length that is a multiple of 4 and '=' only at the end. Returns the decoded length or -1.
 */
static long b64_decode(const uint8_t *s, size_t n, uint8_t *out)
{
	size_t i, o = 0, pad = 0;

	if (n == 0 || n % 4)
		return -1;
	if (s[n - 1] == '=')
		pad = s[n - 2] == '=' ? 2 : 1;
	for (i = 0; i < n; i += 4) {
		int v[4], k;

		for (k = 0; k < 4; k++) {
			bool tail = i + 4 == n && k >= 4 - (int)pad;

			v[k] = tail ? 0 : b64_value(s[i + k]);
			if (v[k] < 0)
				return -1;
		}
		out[o++] = (uint8_t)(v[0] << 2 | v[1] >> 4);
		if (i + 4 < n || pad < 2)
			out[o++] = (uint8_t)(v[1] << 4 | v[2] >> 2);
		if (i + 4 < n || pad < 1)
			out[o++] = (uint8_t)(v[2] << 6 | v[3]);
	}
	return (long)o;
}


int grist_text_read_file(const char *path, uint64_t max, uint8_t **out, size_t *len)
{
	struct stat st;
	uint8_t *buf;
	size_t got = 0;
	int fd = grist_open_regular(path, 0, &st);

	if (fd < 0)
		return fd;
	if ((uint64_t)st.st_size > max) {
		close(fd);
		return grist_fail(-EFBIG, "%s: %llu bytes is too large for a tokenizer file (at most %llu)", path,
				  (unsigned long long)st.st_size, (unsigned long long)max);
	}
	buf = malloc((size_t)st.st_size + 1);
	if (!buf) {
		close(fd);
		return grist_fail(-ENOMEM, "%s: no memory to read it", path);
	}
	while (got < (size_t)st.st_size) {
		ssize_t r = read(fd, buf + got, (size_t)st.st_size - got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			int e = r < 0 ? -errno : -EIO;

			free(buf);
			close(fd);
			return grist_fail(e, "%s: read failed at byte %zu", path, got);
		}
		got += (size_t)r;
	}
	close(fd);
	*out = buf;
	*len = got;
	return 0;
}

/* Parse one line (without its newline); the rank and the token's bytes go to @rank, @tok. */
static int parse_line(const char *path, size_t lineno, const uint8_t *s, size_t n, uint8_t *tok, long *tok_len,
		      uint32_t *rank)
{
	const uint8_t *sp = memchr(s, ' ', n);
	uint64_t r = 0;
	size_t i;

	if (!sp)
		return grist_fail(-EBADMSG, "%s: line %zu: expected '<base64 token> <rank>', the line is cut short",
				  path, lineno);
	*tok_len = b64_decode(s, (size_t)(sp - s), tok);
	if (*tok_len <= 0)
		return grist_fail(-EBADMSG, "%s: line %zu: token '%.*s' is not valid base64", path, lineno,
				  (int)((sp - s) > 64 ? 64 : (sp - s)), (const char *)s);
	if (*tok_len > TOKEN_LEN_MAX)
		return grist_fail(-EBADMSG, "%s: line %zu: a token of %ld bytes (at most %d)", path, lineno, *tok_len,
				  TOKEN_LEN_MAX);
	i = (size_t)(sp - s) + 1;
	if (i >= n)
		return grist_fail(-EBADMSG, "%s: line %zu: the rank is missing, the line is cut short", path, lineno);
	for (; i < n; i++) {
		if (s[i] == '\r' && i + 1 == n)
			break; /* a CRLF file: Python's splitlines() drops the '\r' as well */
		if (s[i] < '0' || s[i] > '9' || (r = r * 10 + (s[i] - '0')) > RANK_MAX)
			return grist_fail(-EBADMSG, "%s: line %zu: rank '%.*s' is not an integer in 0..%u", path,
					  lineno, (int)(n - (size_t)(sp - s) - 1 > 32 ? 32 : n - (size_t)(sp - s) - 1),
					  (const char *)sp + 1, RANK_MAX);
	}
	*rank = (uint32_t)r;
	return 0;
}

void grist_vocab_free(struct grist_vocab *v)
{
	free(v->arena);
	free(v->tok);
	free(v->slots);
	memset(v, 0, sizeof(*v));
}

uint32_t grist_vocab_insert(struct grist_vocab *v, uint32_t r)
{
	size_t len, i;
	const uint8_t *b = grist_vocab_bytes(v, r, &len);
	uint64_t head;

	for (i = grist_vocab_hash(b, len, &head) & v->mask; v->slots[i].rank != GRIST_RANK_NONE;
	     i = (i + 1) & v->mask) {
		size_t ol;
		const uint8_t *ob = grist_vocab_bytes(v, v->slots[i].rank, &ol);

		if (ol == len && !memcmp(ob, b, len))
			return v->slots[i].rank;
	}
	v->slots[i] = (struct grist_vocab_slot){ .head = head, .rank = r, .len = (uint32_t)len };
	if (len == 1)
		v->byte_rank[b[0]] = r;
	return GRIST_RANK_NONE;
}

/* Put rank @r (its bytes already in the arena) into the hash table; -EBADMSG if the bytes repeat. */
static int insert(struct grist_vocab *v, uint32_t r, const char *path, size_t lineno)
{
	uint32_t dup = grist_vocab_insert(v, r);

	if (dup != GRIST_RANK_NONE)
		return grist_fail(-EBADMSG, "%s: line %zu: the token of rank %u repeats rank %u's", path, lineno, r,
				  dup);
	return 0;
}

int grist_vocab_load(struct grist_vocab *v, const char *path)
{
	uint8_t *file = NULL;
	size_t len = 0;
	int ret = grist_text_read_file(path, RANKS_FILE_MAX, &file, &len);

	if (ret)
		return ret;
	ret = grist_vocab_parse(v, path, file, len);
	free(file);
	return ret;
}

int grist_vocab_parse(struct grist_vocab *v, const char *path, const uint8_t *file, size_t len)
{
	const uint8_t *p, *end;
	size_t lines = 0, arena_len = 0, lineno = 0, slots;
	uint32_t *line_rank = NULL;
	int ret;

	memset(v, 0, sizeof(*v));
	v->file_hash = XXH3_64bits(file, len);
	for (p = file; p < file + len; p++)
		lines += *p == '\n';
	lines++;
	/* Decoded tokens are shorter than their base64, so the file's size bounds the arena. */
	v->arena = malloc(len + 1);
	line_rank = malloc(lines * sizeof(*line_rank));
	if (!v->arena || !line_rank) {
		ret = grist_fail(-ENOMEM, "%s: no memory for the vocabulary", path);
		goto out;
	}
	/* Pass 1: decode every line into the arena, remember each line's rank and the largest one. */
	for (p = file, end = file + len; p < end;) {
		const uint8_t *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = (size_t)((nl ? nl : end) - p);
		long tl = 0;
		uint32_t r = 0;

		lineno++;
		if (n == 0 || (n == 1 && p[0] == '\r')) { /* blank lines are skipped, as tiktoken does */
			p += n + 1;
			continue;
		}
		ret = parse_line(path, lineno, p, n, v->arena + arena_len, &tl, &r);
		if (ret)
			goto out;
		/*
		 * The rank -> bytes table has an entry per id up to the largest rank: a rank past
		 * the file's size would size it from one number (2^31 ranks: 16 GB). Real files
		 * number their tokens from 0 with few gaps, at 7 bytes a line or more.
		 */
		if (r >= len) {
			ret = grist_fail(-EBADMSG, "%s: line %zu: rank %u is past any id a ranks file of %zu bytes has"
					 " (ranks are ids from 0, with few gaps)", path, lineno, r, len);
			goto out;
		}
		line_rank[v->n_tokens++] = r;
		if (r + 1 > v->n_ids)
			v->n_ids = r + 1;
		arena_len += (size_t)tl;
		if ((size_t)tl > v->max_len)
			v->max_len = (size_t)tl;
		p += n + 1;
	}
	if (!v->n_tokens) {
		ret = grist_fail(-EBADMSG, "%s: no tokens in the ranks file", path);
		goto out;
	}
	v->tok = calloc(v->n_ids, sizeof(*v->tok));
	for (slots = 16; slots < v->n_tokens * 2; slots *= 2)
		;
	v->slots = malloc(slots * sizeof(*v->slots));
	if (!v->tok || !v->slots) {
		ret = grist_fail(-ENOMEM, "%s: no memory for the vocabulary", path);
		goto out;
	}
	for (size_t i = 0; i < slots; i++)
		v->slots[i] = (struct grist_vocab_slot){ .rank = GRIST_RANK_NONE };
	v->mask = slots - 1;
	for (int b = 0; b < 256; b++)
		v->byte_rank[b] = GRIST_RANK_NONE;
	/* Pass 2: the rank -> bytes table and the hash table, in line order (for the messages). */
	{
		size_t off = 0, k = 0;

		lineno = 0;
		for (p = file, end = file + len; p < end;) {
			const uint8_t *nl = memchr(p, '\n', (size_t)(end - p));
			size_t n = (size_t)((nl ? nl : end) - p), tl;
			const uint8_t *sp;
			uint32_t r;

			lineno++;
			if (n == 0 || (n == 1 && p[0] == '\r')) {
				p += n + 1;
				continue;
			}
			sp = memchr(p, ' ', n);
			r = line_rank[k++];
			tl = (size_t)b64_decode(p, (size_t)(sp - p), v->arena + off);
			if (v->tok[r]) {
				ret = grist_fail(-EBADMSG, "%s: line %zu: rank %u appears twice", path, lineno, r);
				goto out;
			}
			v->tok[r] = (uint64_t)off << 16 | tl;
			ret = insert(v, r, path, lineno);
			if (ret)
				goto out;
			off += tl;
			p += n + 1;
		}
	}
	ret = 0;
out:
	free(line_rank);
	if (ret)
		grist_vocab_free(v);
	return ret;
}
