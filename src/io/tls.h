/* https: which CAs a server's certificate is checked against, and what a TLS failure says. */
#ifndef GRIST_IO_TLS_H
#define GRIST_IO_TLS_H

#include <stddef.h>

#include <curl/curl.h>

/*
 * grist_tls_trust() - point @easy at the CA bundle (and directory) named in the environment,
 * read once per process at first use: AWS_CA_BUNDLE, else CURL_CA_BUNDLE, else
 * SSL_CERT_FILE (a PEM file); SSL_CERT_DIR (a hashed directory). None: libcurl's defaults
 * (the system's store). Every libcurl handle grist makes goes through grist_remote_xfer_setup(),
 * which calls this, so reads, the scheduler, redirects, listings and uploads trust alike.
 */
void grist_tls_trust(CURL *easy);

/*
 * grist_tls_failure() - when @rc is a TLS failure (handshake, certificate, CA file), write
 * what to say into @out: the host, curl's words @why, and how to trust a private CA; return
 * -EPROTO, never to be retried (another attempt meets the same certificate). A handshake
 * the transport cut short (a reset, an EOF) is -ECONNRESET, to be retried as a reset is.
 * Otherwise return 0 and leave @out alone.
 */
int grist_tls_failure(CURLcode rc, const char *host, const char *why, char *out, size_t cap);

#endif
