/*
 * grist/remote.h - datasets in object storage: s3://, gs:// and http(s):// URLs.
 *
 * Wherever grist takes a dataset path (grist_reader_open(), the loader, the fetcher,
 * grist_file_verify(), the CLI, Python) it also takes a URL:
 *
 *   s3://BUCKET/KEY     S3 or an S3-compatible server, signed with SigV4
 *   gs://BUCKET/KEY     Google Cloud Storage's XML API with HMAC keys (SigV4 too)
 *   http(s)://HOST/PATH any server that answers Range GETs
 *
 * Reads are ranged GETs over HTTP/1.1 keep-alive connections (libcurl's multi
 * interface, driven by one GET scheduler thread per endpoint and process, which every
 * reading thread hands its reads to: no thread per request). Opening a dataset
 * of many URLs sends their opening GETs (the last 64 KiB, then on the same connection
 * the footer) together, at most `inflight` at once, from the opening thread.
 *
 * In flight: the scheduler keeps a budget of bytes in flight per endpoint, for all the
 * process's reading threads together, twice the round trip it measures (the least time to first byte of recent GETs) times the bandwidth it
 * measures (the best recent rate of body bytes in), never fewer than min_inflight GETs
 * nor more than max_inflight. The reads the threads hand over ahead of need (their
 * read-ahead windows) wait in one queue while the budget is full, which is also what lets
 * them be merged, across threads: deeper windows and more threads mean denser GETs. Nearby chunk
 * reads are coalesced into one GET, long ones split, failed ones retried with
 * jittered exponential backoff (Retry-After honoured, seconds or an HTTP-date, capped
 * by backoff_max_ms) on 500, 502, 503, 504, 429,
 * SlowDown, connection resets, timeouts and short bodies. Every response's status,
 * Content-Range and length are checked. An object is pinned at open: its ETag goes
 * out as If-Match on every GET and comes back checked on every response, so an
 * object replaced under a reader fails with -ESTALE naming it, never a mix of two
 * versions. The record hashes are checked as for local files.
 *
 * The environment (read at first use, credentials again when a server says the
 * session token expired):
 *   AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN  (none: unsigned requests)
 *   AWS_REGION or AWS_DEFAULT_REGION                             (us-east-1; gs:// "auto")
 *   AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL  a custom S3 endpoint; implies path-style URLs
 *   GRIST_GS_ENDPOINT_URL                    a custom endpoint for gs:// (default
 *                                            https://storage.googleapis.com)
 *   GRIST_REMOTE_OPTIONS                     options in the grist_remote_options_parse() text;
 *                                            one that does not parse fails every remote
 *                                            operation with -EINVAL naming it
 *   AWS_CA_BUNDLE, else CURL_CA_BUNDLE, else SSL_CERT_FILE   the PEM file of the CAs an
 *                                            https server's certificate must chain to (none:
 *                                            libcurl's system store); SSL_CERT_DIR a hashed
 *                                            directory of them. Read once, at first use.
 *
 * Errors name the URL, the HTTP status and the service's error code ("s3://b/k: HTTP
 * 403 SignatureDoesNotMatch: ..."): -EACCES (401, 403), -ENOENT (404: no such key or
 * bucket), -ESTALE (the object changed: 412, another ETag, another size), -EPROTO (400
 * and other refusals, a server that ignores Range; a TLS handshake or certificate refused,
 * "TLS with HOST: ...", never retried), -ETIMEDOUT, -ECONNRESET,
 * -ECONNREFUSED, -EHOSTUNREACH, -EIO (5xx once the retries are spent).
 */
#ifndef GRIST_REMOTE_PUBLIC_H
#define GRIST_REMOTE_PUBLIC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "grist/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Options of the remote backend. Frozen: struct grist_loader_config embeds it, so fields are
 * never added here (docs/architecture.md, "A stable ABI"); size is 0 (unset: the process-wide
 * options) or sizeof(struct), which grist_remote_options_init() sets.
 */
struct grist_remote_options {
	size_t size;
	unsigned connect_timeout_ms; /* connecting to the server, per attempt (5000) */
	unsigned request_timeout_ms; /* a GET that brings < 1 KiB/s for this long (whole seconds,
					rounded up) has stalled, per attempt; none lasts more
					than 10 x this from start to last byte (30000) */
	unsigned retries;            /* attempts after the first (5) */
	unsigned backoff_ms;         /* the first retry waits up to this (100), doubling per attempt */
	unsigned backoff_max_ms;     /* the cap on one wait, Retry-After included (5000) */
	/*
	 * Four bytes in what was padding before coalesce_bytes in grist 0.2, so no offset moves
	 * (as min_inflight below); 0 in any of them (an older caller's zeroed padding) is its default.
	 */
	uint8_t redirects;           /* HTTP redirects followed per request, 1..50 (5) */
	uint8_t part_mib;            /* writes: multipart upload part size in MiB, 5..64 (16) */
	uint8_t upload_inflight;     /* writes: parts uploading at once per object, 1..32 (4);
					the memory bound is (upload_inflight + 1) x part_mib */
	uint8_t direct;              /* GETs from plain http:// endpoints received by grist's own
					HTTP/1.1 straight into the read buffers: 1 (the default), or
					2 for libcurl's path (the option "direct:0") */
	uint64_t coalesce_bytes;     /* reads of one object closer than this are one GET (1 MiB) */
	uint64_t split_bytes;        /* no GET is longer than this (8 MiB); a longer read is split */
	unsigned max_inflight;       /* the hard cap on GETs in flight per endpoint and process (64) */
	/*
	 * GETs always allowed in flight, whatever the budget (2; above max_inflight it is
	 * max_inflight). It sits in what was the struct's tail padding in grist 0.2, so the
	 * struct's size and the offsets of what follows it in grist_loader_config are those of
	 * 0.2; 0 (a zeroed struct of an older caller) means the default.
	 */
	unsigned min_inflight;
};

#define GRIST_REMOTE_DIRECT_ON 1
#define GRIST_REMOTE_DIRECT_OFF 2

/** grist_remote_options_init() - the defaults, with size set. */
GRIST_API void grist_remote_options_init(struct grist_remote_options *o);

/**
 * grist_remote_options_parse() - apply "name:value,..." to @o, the one grammar of the
 * CLI's --remote, Python's grist.set_remote_options() and GRIST_REMOTE_OPTIONS. Names:
 * connect_timeout_ms, timeout_ms, retries, backoff_ms, backoff_max_ms, coalesce, split,
 * inflight, inflight_min, redirects, part (a size, whole MiB), upload_inflight, direct (0 or 1). Sizes are read by grist_parse_size() (grist/options.h), as every
 * size is: K, M, G, T or KiB, MiB, GiB, TiB, powers of 1024. split given without coalesce
 * lowers coalesce to it when it is above ("split:64K" alone means GETs of at most 64 KiB,
 * coalesced up to that); both given with coalesce above split is -EINVAL.
 * Return: 0, or -EINVAL naming the bad item or a value out of bounds.
 */
GRIST_API int grist_remote_options_parse(const char *text, struct grist_remote_options *o);

/**
 * grist_remote_set_options() - the options of io objects created from now on, process-wide.
 * NULL restores the defaults (and GRIST_REMOTE_OPTIONS). A shorter, older struct is
 * accepted (the fields it lacks keep their defaults).
 * Return: 0, or -EINVAL for a value out of bounds (the message says which and the bounds).
 * Thread-safety: any thread.
 */
GRIST_API int grist_remote_set_options(const struct grist_remote_options *o);

/** grist_remote_get_options() - the options in force. */
GRIST_API void grist_remote_get_options(struct grist_remote_options *o);

/* Why a GET was retried. */
enum grist_remote_retry_cause {
	GRIST_REMOTE_RETRY_5XX,       /* 500, 502, 504, or 503 without SlowDown */
	GRIST_REMOTE_RETRY_SLOWDOWN,  /* 503 SlowDown, 429 */
	GRIST_REMOTE_RETRY_RESET,     /* the connection was reset or closed early */
	GRIST_REMOTE_RETRY_TIMEOUT,   /* connect or request timeout */
	GRIST_REMOTE_RETRY_SHORT,     /* fewer body bytes than announced or asked */
	GRIST_REMOTE_RETRY_TOKEN,     /* an expired session token: credentials re-read */
	GRIST_REMOTE_RETRY_CAUSES
};

/** grist_remote_retry_cause_name() - "5xx", "slowdown", "reset", "timeout", "short", "token". */
GRIST_API const char *grist_remote_retry_cause_name(int cause);

/* What the remote reads of a loader (or fetcher) did. All zero when it read no URL. */
struct grist_remote_stats {
	uint64_t requests;          /* GETs completed (each attempt counts; the files' opening GETs included) */
	uint64_t bytes;             /* body bytes received (the opening GETs' included) */
	uint64_t retries[GRIST_REMOTE_RETRY_CAUSES];
	uint64_t errors;            /* GETs that failed for good */
	double inflight_mean;       /* GETs in flight per endpoint, averaged over time */
	uint64_t inflight_max;      /* the most GETs in flight to one endpoint at once */
	uint64_t latency_p50_us;    /* GET latency, first byte asked to last byte in */
	uint64_t latency_p99_us;
};

/*
 * The in-flight budget's figures (see "In flight" above): the GET scheduler of each
 * endpoint keeps about 2 x rtt x bandwidth bytes of GETs out, measured as it reads, within
 * [inflight_min, inflight] GETs. A struct of its own, appended to grist_loader_stats and
 * grist_fetcher_stats as remote_budget, because grist_remote_stats is embedded in them and
 * so frozen. Frozen too, for the same reason.
 */
struct grist_remote_budget_stats {
	uint64_t budget_bytes;      /* the endpoints' budgets as last measured, summed */
	uint64_t budget_max_bytes;  /* the largest one endpoint's budget reached */
	uint64_t rtt_us;            /* the round trip measured (least time to first byte, recent) */
	uint64_t bandwidth;         /* bytes/s one endpoint measured (recent best) */
	double inflight_bytes_mean; /* body bytes asked for and not yet in, per endpoint, over time */
	double ahead_bytes_mean;    /* bytes the engine asked for that wait for the budget (the
				       known read-ahead), per endpoint, over time */
};

/** grist_path_is_url() - true when @path is an s3://, gs://, http:// or https:// URL. */
GRIST_API bool grist_path_is_url(const char *path);

/**
 * grist_remote_glob() - expand @pattern, an s3:// or gs:// URL whose key holds * ? or
 * [...] (in the last segments, as for a local glob: '*' does not cross '/'), with
 * ListObjectsV2 under the prefix before the first glob character. The matches come
 * sorted bytewise, as a sorted local glob. A key equal to @pattern itself (an object
 * named "a[1].ar") is the one match, as a local name that exists is taken as it is.
 * Return: 0 with *@urls (malloc'd strings, free with grist_remote_glob_free()) and
 * *@n (0 when nothing matches), or a negative error naming the URL and HTTP status.
 */
GRIST_API int grist_remote_glob(const char *pattern, char ***urls, size_t *n);
GRIST_API void grist_remote_glob_free(char **urls, size_t n);

/**
 * grist_remote_get() - the whole of the object at @url (s3://, gs://, http(s)://): a
 * dataset's metadata (TFDS's dataset_info.json and features.json), read as its data
 * files are: the same credentials, timeouts, retries and errors, and pinned by its ETag
 * from the first GET to the last (an object replaced between them is -ESTALE).
 * @max_bytes bounds it: a larger object is -EFBIG naming it, and only its last 64 KiB
 * were fetched.
 * Return: 0 with *@data (@len bytes and a NUL after them; free with
 * grist_remote_get_free()) and *@len, or a negative error naming the URL and the HTTP
 * status: -ENOENT for no such key or bucket, -EACCES for refused credentials, as above.
 * Thread-safety: any thread.
 */
GRIST_API int grist_remote_get(const char *url, size_t max_bytes, void **data, size_t *len);
GRIST_API void grist_remote_get_free(void *data);

/**
 * grist_remote_put() - make @data[0..@len) the object at @url (s3:// or gs://), as a writer
 * to that URL writes (grist_writer_open(), grist/format.h): one PutObject below 1 MiB,
 * else a multipart upload; MD5-checked, the parts listed and checked before completing;
 * nothing at the key on failure. For a dataset's metadata (TFDS's dataset_info.json and
 * features.json).
 * Return: 0, or a negative error naming the URL and the HTTP status. Thread-safety: any thread.
 */
GRIST_API int grist_remote_put(const char *url, const void *data, size_t len);

/**
 * grist_remote_delete() - delete the object at @url (s3:// or gs://): the files of a
 * dataset write that failed half way. Deleting a key that does not exist is no error (S3).
 * Return: 0, or a negative error naming the URL and the HTTP status.
 */
GRIST_API int grist_remote_delete(const char *url);

#ifdef __cplusplus
}
#endif
#endif
