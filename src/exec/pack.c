/*
 * Sequence packing after the engine: first-fit and best-fit (Grain's FirstFitPackIterDataset and
 * BestFitPackIterDataset) and concat-then-split (with Grain's BOS replacement or without),
 * optionally on records cut into pieces first.
 */
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "exec/pack.h"

#define MAX_LENGTH ((size_t)1 << 24)
#define MAX_BINS ((size_t)1 << 20)

/*
 * One delivered batch: tokens, then segment ids, then positions, in one pinned
 * region of its slot (each part 64-byte aligned). The slot's index arrays are unused.
 */
struct pack_out {
	struct grist_slot slot;
	size_t rows;            /* complete rows */
	size_t reserved;        /* rows handed out to be filled: rows <= reserved <= batch_rows */
	uint64_t tokens;        /* real tokens in the rows */
	struct grist_pack_resume end; /* the checkpoint after the last row */
	struct pack_out *next;  /* free list, ready queue, or the chain of slots being filled */
	struct pack_out *all;   /* every slot the packer owns */
};

/* Where one row is written. */
struct row_ref {
	uint8_t *tok;
	uint32_t *seg, *pos;
};

/*
 * First-fit and best-fit: the open rows of the current round and a max tree over their
 * free room. The rows are written in place, in the delivered batches: a row is reserved
 * the first time its bin is used, and bins are used in order (first-fit tries a bin only
 * after every bin before it; best-fit scores every empty bin alike and takes the lowest
 * index on a tie; an empty bin fits anything), so reservation order is row order.
 */
struct first_fit {
	struct row_ref *row;    /* bins: where each used bin's row lives */
	uint32_t *used;         /* tokens in each row */
	uint32_t *nseg;         /* sequences in each row */
	/*
	 * tree[leaves + b] = free room of row b plus 1 (0 for leaves past the last bin), each
	 * inner node the max of its children: the leftmost row with room >= m is found in
	 * O(log bins) by walking down towards the left whenever the left subtree has room.
	 */
	uint32_t *tree;
	size_t leaves;
	size_t rows;            /* bins holding anything: always a prefix */
	bool open;              /* the round holds at least one sequence */
	uint64_t start;         /* position of the round's first record */
	uint64_t start_piece;   /* the piece of that record the round began with */
	uint8_t *scratch;       /* resume: rows of the first round that were delivered before (pk->skip of them;
				   freed with that round) */
};

struct grist_packer {
	struct grist_pack_params p;
	struct grist_pack_source src;
	size_t row_tokens_bytes; /* L x token_bytes */
	size_t seg_at, pos_at, out_bytes; /* layout of a pack_out region */
	struct pack_out *all, *free, *ready, *ready_tail;
	/*
	 * Slots being filled, oldest first, linked by next: cur takes the next complete row,
	 * fill the next reservation (the same slot unless a round spans batches).
	 */
	struct pack_out *cur, *fill;
	uint64_t end_position;   /* position just past the last record pulled */
	uint64_t filtered;
	uint64_t skip;           /* resume: rows of the first round (first-fit, best-fit) or tokens of the
				    first record (concat-split) not to deliver again */
	bool check_first;        /* resume: the first record must sit at resume_position (concat-split with
				    a skip, or any resume inside a record's pieces) */
	uint64_t resume_position;
	uint64_t resume_piece;   /* first-fit, best-fit resume: pieces of the first record not pushed */
	bool ended;
	/* concat-split: the row being filled (row.tok NULL when none) */
	struct row_ref row;
	uint32_t row_used, row_nseg;
	bool row_bos_pad;        /* bos: the row's last segment is empty and its BOS lies in the padding */
	struct first_fit ff;
};

static size_t align64(size_t n)
{
	return (n + 63) & ~(size_t)63;
}

int grist_packer_check(const struct grist_pack_params *p, size_t max_bytes)
{
	size_t per_row;

	bool rounds = p->mode == GRIST_PACK_FIRST_FIT || p->mode == GRIST_PACK_BEST_FIT;

	if (!rounds && p->mode != GRIST_PACK_CONCAT_SPLIT)
		return grist_fail(-EINVAL, "packing: unknown mode %d", (int)p->mode);
	if (p->token_bytes != 1 && p->token_bytes != 2 && p->token_bytes != 4)
		return grist_fail(-EINVAL, "packing: token width %u bytes; it must be 1, 2 or 4", p->token_bytes);
	if (p->length == 0 || p->length > MAX_LENGTH)
		return grist_fail(-EINVAL, "packing: row length %zu tokens; it must be 1 .. %zu", p->length, MAX_LENGTH);
	if (rounds && (p->bins == 0 || p->bins > MAX_BINS))
		return grist_fail(-EINVAL, "packing: %zu bins; first-fit and best-fit need 1 .. %zu", p->bins,
				  MAX_BINS);
	if (p->piece > MAX_LENGTH)
		return grist_fail(-EINVAL, "packing: pieces of %zu tokens; at most %zu", p->piece, MAX_LENGTH);
	if (p->bos && p->mode != GRIST_PACK_CONCAT_SPLIT)
		return grist_fail(-EINVAL, "packing: BOS replacement applies to concat-split only");
	if (p->bos && p->token_bytes < 4 && p->bos_id >> (8 * p->token_bytes))
		return grist_fail(-EINVAL, "packing: BOS id %u does not fit a %u-byte token", p->bos_id, p->token_bytes);
	if (p->batch_rows == 0)
		return grist_fail(-EINVAL, "packing: a batch needs at least one row");
	per_row = p->length * (p->token_bytes + 2 * sizeof(uint32_t));
	if (p->batch_rows > max_bytes / per_row)
		return grist_fail(-EINVAL, "packing: a batch of %zu rows of %zu tokens (with segment ids and "
				  "positions) is larger than max_batch_bytes (%zu)", p->batch_rows, p->length, max_bytes);
	if (rounds && p->bins > max_bytes / per_row)
		return grist_fail(-EINVAL, "packing: %zu bins of %zu tokens (with segment ids and positions) are "
				  "larger than max_batch_bytes (%zu)", p->bins, p->length, max_bytes);
	return 0;
}

/* ---- output batches ---- */

static int out_take(struct grist_packer *pk, struct pack_out **out)
{
	struct pack_out *o = pk->free;
	int ret;

	if (o) {
		pk->free = o->next;
	} else {
		o = calloc(1, sizeof(*o));
		if (!o)
			return grist_fail(-ENOMEM, "packing: out of memory");
		ret = grist_slot_init(&o->slot, 1, pk->out_bytes);
		if (ret) {
			free(o);
			return ret;
		}
		o->all = pk->all;
		pk->all = o;
	}
	o->next = NULL;
	o->rows = 0;
	o->reserved = 0;
	o->tokens = 0;
	*out = o;
	return 0;
}

static struct pack_out *out_of(struct grist_slot *s)
{
	return (struct pack_out *)((char *)s - offsetof(struct pack_out, slot));
}

/* The next row of the delivered stream, to be completed by row_done() in the same order. */
static int reserve_row(struct grist_packer *pk, struct row_ref *r)
{
	struct pack_out *o = pk->fill;
	size_t i;
	int ret;

	if (!o || o->reserved == pk->p.batch_rows) {
		ret = out_take(pk, &o);
		if (ret)
			return ret;
		if (pk->fill)
			pk->fill->next = o;
		else
			pk->cur = o;
		pk->fill = o;
	}
	i = o->reserved++;
	r->tok = o->slot.data + i * pk->row_tokens_bytes;
	r->seg = (uint32_t *)(o->slot.data + pk->seg_at) + i * pk->p.length;
	r->pos = (uint32_t *)(o->slot.data + pk->pos_at) + i * pk->p.length;
	return 0;
}

static void ready_push(struct grist_packer *pk, struct pack_out *o)
{
	o->next = NULL;
	if (pk->ready_tail)
		pk->ready_tail->next = o;
	else
		pk->ready = o;
	pk->ready_tail = o;
}

/*
 * The oldest reserved row, filled with @used tokens, is complete: zero its padding and
 * hand it on. @position, @piece and @skip are the checkpoint after it.
 */
static void row_done(struct grist_packer *pk, const struct row_ref *r, size_t used, uint64_t position,
		     uint64_t piece, uint64_t skip)
{
	struct pack_out *o = pk->cur;
	size_t pad = pk->p.length - used;

	memset(r->tok + used * pk->p.token_bytes, 0, pad * pk->p.token_bytes);
	memset(r->seg + used, 0, pad * sizeof(uint32_t));
	memset(r->pos + used, 0, pad * sizeof(uint32_t));
	o->rows++;
	o->tokens += used;
	o->end = (struct grist_pack_resume){ .position = position, .piece = piece, .skip = skip };
	if (o->rows == pk->p.batch_rows) {
		pk->cur = o->next;
		if (!pk->cur)
			pk->fill = NULL;
		ready_push(pk, o);
	}
}

/* ---- first-fit ---- */

static void tree_set(struct first_fit *f, size_t b, uint32_t v)
{
	size_t i = f->leaves + b;

	f->tree[i] = v;
	for (i >>= 1; i; i >>= 1)
		f->tree[i] = f->tree[2 * i] > f->tree[2 * i + 1] ? f->tree[2 * i] : f->tree[2 * i + 1];
}

static void tree_reset(struct first_fit *f, size_t bins, size_t length)
{
	size_t i;

	for (i = 0; i < f->leaves; i++)
		f->tree[f->leaves + i] = i < bins ? (uint32_t)length + 1 : 0;
	for (i = f->leaves - 1; i; i--)
		f->tree[i] = f->tree[2 * i] > f->tree[2 * i + 1] ? f->tree[2 * i] : f->tree[2 * i + 1];
}

/* First-fit: the first row with room for @m tokens, or SIZE_MAX. */
static size_t tree_find(const struct first_fit *f, uint32_t m)
{
	size_t i = 1;

	if (f->tree[1] < m + 1)
		return SIZE_MAX;
	while (i < f->leaves)
		i = f->tree[2 * i] >= m + 1 ? 2 * i : 2 * i + 1;
	return i - f->leaves;
}

/*
 * Best-fit, as BestFitPackedBatch scores bins: of the rows with room for @m tokens, the
 * fullest, the lowest index on a tie; an empty bin scores 0, so the next unused one
 * (f->rows) is taken only when no used row fits or the fitting ones are empty too and
 * come first. SIZE_MAX: no bin fits. A scan of the used rows (bins is a batch's rows):
 * an exact fit cannot be beaten and ends it.
 */
static size_t best_find(const struct first_fit *f, size_t bins, uint32_t length, uint32_t m)
{
	size_t b, best = SIZE_MAX;

	for (b = 0; b < f->rows; b++) {
		if (f->used[b] + m > length || (best != SIZE_MAX && f->used[b] <= f->used[best]))
			continue;
		best = b;
		if (f->used[b] + m == length)
			break;
	}
	if (best == SIZE_MAX && f->rows < bins)
		best = f->rows;
	return best;
}

static int ff_init(struct grist_packer *pk)
{
	struct first_fit *f = &pk->ff;
	size_t b = pk->p.bins, L = pk->p.length;

	f->leaves = 1;
	while (f->leaves < b)
		f->leaves <<= 1;
	f->row = calloc(b, sizeof(*f->row));
	f->used = calloc(b, sizeof(uint32_t));
	f->nseg = calloc(b, sizeof(uint32_t));
	f->tree = calloc(2 * f->leaves, sizeof(uint32_t));
	if (pk->skip)
		f->scratch = malloc(pk->skip * L * (pk->p.token_bytes + 2 * sizeof(uint32_t)));
	if (!f->row || !f->used || !f->nseg || !f->tree || (pk->skip && !f->scratch))
		return grist_fail(-ENOMEM, "packing: cannot allocate %zu bins", b);
	tree_reset(f, b, L);
	return 0;
}

static void ff_free(struct first_fit *f)
{
	free(f->row);
	free(f->used);
	free(f->nseg);
	free(f->tree);
	free(f->scratch);
}

/* Bin @b is used for the first time: give it a row (a scratch one if it was delivered before a restore). */
static int ff_open_row(struct grist_packer *pk, size_t b)
{
	struct first_fit *f = &pk->ff;
	size_t L = pk->p.length, stride = L * (pk->p.token_bytes + 2 * sizeof(uint32_t));

	if (b >= pk->skip)
		return reserve_row(pk, &f->row[b]);
	f->row[b].tok = f->scratch + b * stride;
	f->row[b].seg = (uint32_t *)(f->row[b].tok + L * pk->p.token_bytes);
	f->row[b].pos = f->row[b].seg + L;
	return 0;
}

/*
 * Emit the round's rows in order and empty it. @next and @next_piece are the record and
 * piece that start the next round (or the end): the checkpoint after the round's last row.
 */
static int ff_flush(struct grist_packer *pk, uint64_t next, uint64_t next_piece)
{
	struct first_fit *f = &pk->ff;
	size_t r;

	if (pk->skip && pk->skip >= f->rows)
		return grist_fail(-EBADMSG, "resume state: it skips %llu rows of a packing round that has %zu; "
				  "the state does not belong to these records", (unsigned long long)pk->skip, f->rows);
	for (r = pk->skip; r < f->rows; r++) {
		if (r + 1 < f->rows)
			row_done(pk, &f->row[r], f->used[r], f->start, f->start_piece, r + 1);
		else
			row_done(pk, &f->row[r], f->used[r], next, next_piece, 0);
	}
	pk->skip = 0;
	/* only the first round after a restore has rows delivered before: their scratch goes */
	free(f->scratch);
	f->scratch = NULL;
	memset(f->used, 0, f->rows * sizeof(uint32_t));
	memset(f->nseg, 0, f->rows * sizeof(uint32_t));
	tree_reset(f, pk->p.bins, pk->p.length);
	f->rows = 0;
	f->open = false;
	return 0;
}

static void fill_segment(uint32_t *seg, uint32_t *pos, uint32_t id, uint32_t m)
{
	uint32_t i;

	for (i = 0; i < m; i++) {
		seg[i] = id;
		pos[i] = i;
	}
}

/* Piece @piece of the record at @position (0 without pieces), @m <= L tokens, into a row of the round. */
static int ff_push(struct grist_packer *pk, const uint8_t *data, uint32_t m, uint64_t position, uint64_t piece)
{
	struct first_fit *f = &pk->ff;
	size_t L = pk->p.length, b;
	struct row_ref *r;
	uint32_t at;
	int ret;

	if (pk->p.mode == GRIST_PACK_BEST_FIT)
		b = best_find(f, pk->p.bins, (uint32_t)L, m);
	else
		b = tree_find(f, m);
	if (b == SIZE_MAX) {
		ret = ff_flush(pk, position, piece);
		if (ret)
			return ret;
		b = 0; /* m <= L: an empty row takes it */
	}
	if (!f->open) {
		f->open = true;
		f->start = position;
		f->start_piece = piece;
	}
	if (b == f->rows) {
		ret = ff_open_row(pk, b);
		if (ret)
			return ret;
		f->rows = b + 1;
	}
	r = &f->row[b];
	at = f->used[b];
	if (m)
		memcpy(r->tok + (size_t)at * pk->p.token_bytes, data, (size_t)m * pk->p.token_bytes);
	fill_segment(r->seg + at, r->pos + at, ++f->nseg[b], m);
	f->used[b] = at + m;
	tree_set(f, b, (uint32_t)(L - f->used[b]) + 1);
	return 0;
}

/* ---- concat-then-split ---- */

/* Token @i of a row: little-endian, token_bytes wide, as the records store them. */
static void put_token(const struct grist_packer *pk, uint8_t *row, size_t i, uint32_t v)
{
	unsigned b;

	for (b = 0; b < pk->p.token_bytes; b++)
		row[i * pk->p.token_bytes + b] = (uint8_t)(v >> (8 * b));
}

/*
 * With bos, the segment's first cell becomes BOS, as Grain's _pack_elements writes
 * values[start] = bos_token_id after each sequence: for an empty one too, whose cell is
 * the next segment's first (BOS again) or, when none follows, the row's padding. An empty
 * sequence in a full row has no such cell (Grain's write raises IndexError there).
 */
static int cts_append(struct grist_packer *pk, const uint8_t *data, uint32_t m)
{
	int ret;

	if (!pk->row.tok && (ret = reserve_row(pk, &pk->row)))
		return ret;
	if (m)
		memcpy(pk->row.tok + (size_t)pk->row_used * pk->p.token_bytes, data, (size_t)m * pk->p.token_bytes);
	if (pk->p.bos && m)
		put_token(pk, pk->row.tok, pk->row_used, pk->p.bos_id);
	pk->row_bos_pad = pk->p.bos && !m && pk->row_used < pk->p.length;
	fill_segment(pk->row.seg + pk->row_used, pk->row.pos + pk->row_used, ++pk->row_nseg, m);
	pk->row_used += m;
	return 0;
}

/* The row being filled is complete. */
static void cts_finish_row(struct grist_packer *pk, uint64_t position, uint64_t skip)
{
	row_done(pk, &pk->row, pk->row_used, position, 0, skip);
	if (pk->row_bos_pad) /* after row_done() zeroed the padding; the batch is not handed out yet */
		put_token(pk, pk->row.tok, pk->row_used, pk->p.bos_id);
	pk->row.tok = NULL;
	pk->row_used = 0;
	pk->row_nseg = 0;
	pk->row_bos_pad = false;
}

/*
 * Grain's loop, one sequence at a time: a sequence that fits the room left goes in whole
 * (an empty one too, even into a full row); one that does not fills the room, the row
 * is emitted, and the rest starts the next row as its segment 1, positions from 0, and
 * is cut again every L tokens. @off tokens of the sequence were delivered before a
 * restore. The sequence is the record at @position, or its piece that starts @base
 * tokens into it: a checkpoint counts the record's tokens.
 */
static int cts_push(struct grist_packer *pk, const uint8_t *data, uint64_t m, uint64_t position, uint64_t base,
		    uint64_t off)
{
	uint64_t L = pk->p.length, avail = L - pk->row_used;
	size_t tb = pk->p.token_bytes;
	int ret;

	if (m - off <= avail)
		return cts_append(pk, data + off * tb, (uint32_t)(m - off));
	if (avail) {
		ret = cts_append(pk, data + off * tb, (uint32_t)avail);
		if (ret)
			return ret;
	}
	off += avail;
	cts_finish_row(pk, position, base + off);
	while (m - off > L) {
		ret = cts_append(pk, data + off * tb, (uint32_t)L);
		if (ret)
			return ret;
		off += L;
		cts_finish_row(pk, position, base + off);
	}
	return cts_append(pk, data + off * tb, (uint32_t)(m - off));
}

/* ---- the record stream ---- */

static int resume_mismatch(const struct grist_packer *pk, uint64_t position, uint64_t n)
{
	if (pk->p.mode == GRIST_PACK_CONCAT_SPLIT)
		return grist_fail(-EBADMSG, "resume state: %llu tokens of the sequence at position %llu were "
				  "delivered, but the first record is at position %llu with %llu tokens; the "
				  "state does not belong to these records",
				  (unsigned long long)pk->skip, (unsigned long long)pk->resume_position,
				  (unsigned long long)position, (unsigned long long)n);
	return grist_fail(-EBADMSG, "resume state: a packing round began at piece %llu of the record at position "
			  "%llu, but the first record is at position %llu with %llu tokens (%llu pieces); the state "
			  "does not belong to these records", (unsigned long long)pk->resume_piece,
			  (unsigned long long)pk->resume_position, (unsigned long long)position,
			  (unsigned long long)n, (unsigned long long)(n + pk->p.piece - 1) / pk->p.piece);
}

/*
 * Without pieces, first-fit and best-fit cut a sequence to L tokens (Grain refuses longer
 * ones and asks for that cut as a map before the packer); concat-split takes it whole and
 * splits it across rows, as ConcatThenSplitIterDataset does. With pieces, each piece is a
 * sequence of its own, as TokenizeAndChunk's examples are, and a record of no tokens has
 * no piece (TokenizeAndChunk returns no example for it).
 */
static int push_record(struct grist_packer *pk, const uint8_t *data, size_t len, uint64_t position, uint32_t dataset,
		       uint64_t record)
{
	size_t tb = pk->p.token_bytes;
	uint64_t n, off = 0, first = 0, k, at, m, piece = pk->p.piece ? pk->p.piece : UINT64_MAX;
	int ret;

	if (len % tb) {
		grist_fail(-EMSGSIZE, "dataset %u record %llu: %zu bytes is not a whole number of %zu-byte tokens",
			   dataset, (unsigned long long)record, len, tb);
		return pk->src.record_error(pk->src.ctx, dataset, record, -EMSGSIZE);
	}
	n = len / tb;
	if (pk->check_first) {
		pk->check_first = false;
		if (pk->p.mode == GRIST_PACK_CONCAT_SPLIT) {
			if (position != pk->resume_position || pk->skip >= n)
				return resume_mismatch(pk, position, n);
			off = pk->skip;
			pk->skip = 0;
		} else {
			if (position != pk->resume_position || pk->resume_piece >= (n + piece - 1) / piece)
				return resume_mismatch(pk, position, n);
			first = pk->resume_piece;
		}
	}
	if (pk->p.mode != GRIST_PACK_CONCAT_SPLIT) {
		if (!pk->p.piece)
			return ff_push(pk, data, (uint32_t)(n < pk->p.length ? n : pk->p.length), position, 0);
		for (k = first; k * piece < n; k++) {
			at = k * piece;
			m = n - at < piece ? n - at : piece;
			ret = ff_push(pk, data + at * tb, (uint32_t)(m < pk->p.length ? m : pk->p.length), position, k);
			if (ret)
				return ret;
		}
		return 0;
	}
	if (!pk->p.piece)
		return cts_push(pk, data, n, position, 0, off);
	for (at = off / piece * piece; at < n; at += piece) {
		m = n - at < piece ? n - at : piece;
		ret = cts_push(pk, data + at * tb, m, position, at, off > at ? off - at : 0);
		if (ret)
			return ret;
	}
	return 0;
}

static uint64_t row_position(const struct grist_slot *s, size_t i)
{
	return s->parent ? s->parent->positions[s->view_first + i] : s->positions[i];
}

static int consume(struct grist_packer *pk, struct grist_slot *s)
{
	const struct grist_batch *b = &s->batch;
	size_t i;
	int ret;

	for (i = 0; i < b->num_records; i++) {
		ret = push_record(pk, b->data + b->offsets[i], b->offsets[i + 1] - b->offsets[i], row_position(s, i),
				  b->datasets[i], b->indices[i]);
		if (ret)
			return ret;
	}
	pk->filtered += s->filtered;
	pk->end_position = s->stream_end;
	return 0;
}

/* The stream ended: emit what is open, then the short last batch unless it is dropped. */
static int finish(struct grist_packer *pk)
{
	int ret;

	if (pk->check_first)
		return grist_fail(-EBADMSG, "resume state: %llu %s of the record at position %llu were delivered, "
				  "but the stream ends there",
				  (unsigned long long)(pk->p.mode == GRIST_PACK_CONCAT_SPLIT ? pk->skip : pk->resume_piece),
				  pk->p.mode == GRIST_PACK_CONCAT_SPLIT ? "tokens" : "pieces",
				  (unsigned long long)pk->resume_position);
	if (pk->p.mode != GRIST_PACK_CONCAT_SPLIT) {
		if (pk->skip && !pk->ff.open)
			return grist_fail(-EBADMSG, "resume state: it skips %llu rows of a packing round at position "
					  "%llu, but the stream ends there", (unsigned long long)pk->skip,
					  (unsigned long long)pk->resume_position);
		if (pk->ff.open && (ret = ff_flush(pk, pk->end_position, 0)))
			return ret;
	} else if (pk->row.tok) {
		cts_finish_row(pk, pk->end_position, 0);
	}
	/* every reserved row is complete now, so at most one slot is left, holding a short batch */
	if (pk->cur) {
		if (pk->p.drop_remainder) {
			pk->cur->next = pk->free;
			pk->free = pk->cur;
		} else {
			ready_push(pk, pk->cur);
		}
		pk->cur = pk->fill = NULL;
	}
	return 0;
}

static void publish(struct grist_packer *pk, struct pack_out *o)
{
	struct grist_batch *b = &o->slot.batch;

	memset(b, 0, sizeof(*b));
	b->num_records = b->num_rows = o->rows;
	b->data = o->slot.data;
	b->record_bytes = pk->row_tokens_bytes;
	b->bytes = o->rows * pk->row_tokens_bytes;
	b->segment_ids = (const uint32_t *)(o->slot.data + pk->seg_at);
	b->positions = (const uint32_t *)(o->slot.data + pk->pos_at);
}

int grist_packer_next(struct grist_packer *pk, struct grist_slot **out)
{
	struct grist_slot *s;
	struct pack_out *o;
	bool last = false;
	int ret;

	*out = NULL;
	while (!pk->ready && !pk->ended) {
		s = NULL;
		ret = pk->src.pull(pk->src.ctx, &s);
		if (ret)
			return ret;
		if (s) {
			/* an engine's batch holds no record only at the end (the rest was filtered out) */
			last = s->count == 0;
			ret = consume(pk, s);
			pk->src.release(pk->src.ctx, s);
			if (ret)
				return ret;
		}
		if (!s || last) {
			pk->ended = true;
			ret = finish(pk);
			if (ret)
				return ret;
		}
	}
	o = pk->ready;
	if (!o)
		return 0;
	pk->ready = o->next;
	if (!pk->ready)
		pk->ready_tail = NULL;
	o->next = NULL;
	publish(pk, o);
	*out = &o->slot;
	return 0;
}

void grist_packer_release(struct grist_packer *pk, struct grist_slot *s)
{
	struct pack_out *o = out_of(s);

	o->next = pk->free;
	pk->free = o;
}

void grist_packer_batch_info(const struct grist_slot *s, struct grist_pack_resume *after, uint64_t *tokens)
{
	const struct pack_out *o = (const struct pack_out *)((const char *)s - offsetof(struct pack_out, slot));

	*after = o->end;
	*tokens = o->tokens;
}

uint64_t grist_packer_end_position(const struct grist_packer *pk)
{
	return pk->end_position;
}

uint64_t grist_packer_filtered(const struct grist_packer *pk)
{
	return pk->filtered;
}

uint64_t grist_packer_memory(const struct grist_packer *pk)
{
	const struct pack_out *o;
	uint64_t n = 0;

	for (o = pk->all; o; o = o->all)
		n += o->slot.cap;
	if (pk->p.mode != GRIST_PACK_CONCAT_SPLIT)
		n += pk->p.bins * (sizeof(struct row_ref) + 2 * sizeof(uint32_t)) + 2 * pk->ff.leaves * sizeof(uint32_t) +
		     pk->skip * pk->p.length * (pk->p.token_bytes + 2 * sizeof(uint32_t));
	return n;
}

int grist_packer_create(const struct grist_pack_params *p, const struct grist_pack_source *src,
			const struct grist_pack_resume *at, struct grist_packer **out)
{
	bool rounds = p->mode != GRIST_PACK_CONCAT_SPLIT;
	struct grist_packer *pk;
	size_t cells;
	int ret;

	*out = NULL;
	ret = grist_packer_check(p, SIZE_MAX);
	if (ret)
		return ret;
	if (rounds && at->skip >= p->bins)
		return grist_fail(-EBADMSG, "resume state: it skips %llu rows of a round; a round has at most %zu",
				  (unsigned long long)at->skip, p->bins);
	if (at->piece && (!rounds || !p->piece))
		return grist_fail(-EBADMSG, "resume state: it names piece %llu of a record, but this loader %s",
				  (unsigned long long)at->piece, p->piece ? "packs concat-split (it counts tokens)" :
				  "does not cut records into pieces");
	pk = calloc(1, sizeof(*pk));
	if (!pk)
		return grist_fail(-ENOMEM, "packing: out of memory");
	pk->p = *p;
	pk->src = *src;
	pk->row_tokens_bytes = p->length * p->token_bytes;
	cells = p->batch_rows * p->length;
	pk->seg_at = align64(cells * p->token_bytes);
	pk->pos_at = pk->seg_at + align64(cells * sizeof(uint32_t));
	pk->out_bytes = pk->pos_at + cells * sizeof(uint32_t);
	pk->end_position = at->position;
	pk->resume_position = at->position;
	pk->resume_piece = at->piece;
	pk->skip = at->skip;
	pk->check_first = (!rounds && at->skip) || at->piece;
	if (rounds) {
		ret = ff_init(pk);
		if (ret) {
			grist_packer_destroy(pk);
			return ret;
		}
	}
	*out = pk;
	return 0;
}

void grist_packer_destroy(struct grist_packer *pk)
{
	struct pack_out *o, *next;

	if (!pk)
		return;
	for (o = pk->all; o; o = next) {
		next = o->all;
		grist_slot_free(&o->slot);
		free(o);
	}
	ff_free(&pk->ff);
	free(pk);
}
