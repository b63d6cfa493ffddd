/*
 * Writing one object to s3:// or gs:// (the XML API): a multipart upload (upload.c).
 *
 * Bytes are cut into parts of `part` MiB (the remote option) and uploaded by
 * `upload_inflight` threads of the upload's own while the caller makes the next ones;
 * the caller waits when every part buffer is taken, so an upload holds at most
 * (upload_inflight + 1) x part bytes, and once finished, while it waits for commit, none
 * but an object below 1 MiB. Nothing is visible at the key until commit
 * (CompleteMultipartUpload); an object below 1 MiB is one PutObject at commit.
 * Every part goes with its Content-MD5 (signed), its ETag is checked against it, the
 * server's ListParts against the parts sent (sizes adding up to the bytes written) before
 * completing, and the completed object's ETag against the parts'.
 * Any failure, grist_upload_abort() and grist_upload_abort_all() end with
 * AbortMultipartUpload: no object and no parts are left behind.
 */
#ifndef GRIST_IO_UPLOAD_H
#define GRIST_IO_UPLOAD_H

#include <stddef.h>
#include <stdint.h>

struct grist_upload;

/* Start writing @url (s3:// or gs://). 0, or -EINVAL (another scheme, no key), -ENOMEM, -EAGAIN. */
int grist_upload_open(const char *url, struct grist_upload **out);
/* Append @n bytes (copied). Blocks while every part buffer is taken. 0 or the upload's error. */
int grist_upload_write(struct grist_upload *u, const void *p, size_t n);
/* Send what is left and wait until every part is uploaded (nothing visible yet). 0 or an error. */
int grist_upload_finish(struct grist_upload *u);
/* Make the object visible and check it; frees @u (aborting the upload on failure). 0 or an error. */
int grist_upload_commit(struct grist_upload *u);
/* Stop, AbortMultipartUpload, free @u. */
void grist_upload_abort(struct grist_upload *u);
/* The bytes written so far. */
uint64_t grist_upload_bytes(const struct grist_upload *u);

/*
 * grist_upload_abort_all() - a process that is ending (grist_writer_abort_all(), from an
 * ordinary thread, never a signal handler): no upload starts any more (-ECANCELED);
 * every upload not yet committed stops (its owner's next call fails with -ECANCELED),
 * its running PUTs are cancelled, and it is aborted (AbortMultipartUpload, all at once),
 * within @timeout_ms in all. An owner freeing its upload meanwhile waits for this to end.
 * Return: 0, or the first upload not known to be aborted (its URL and why; -ETIMEDOUT
 * when the time ran out).
 */
int grist_upload_abort_all(unsigned timeout_ms);

#endif
