/*
 * https: which CAs grist trusts, and the words of a TLS failure.
 *
 * libcurl itself reads no environment for its CA bundle (the curl tool does), so a private
 * CA (a MinIO or Ceph gateway, a corporate proxy) could not be trusted at all. grist takes
 * the names its users already set for their other tools: AWS_CA_BUNDLE (the AWS CLI and
 * SDKs, the usual neighbour of AWS_ENDPOINT_URL), CURL_CA_BUNDLE (the curl tool), and
 * OpenSSL's SSL_CERT_FILE / SSL_CERT_DIR. Read once, at first use, as the credentials are:
 * a process trusts one set of CAs, whatever thread or handle asks.
 */
#include "io/tls.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pthread_once_t trust_once = PTHREAD_ONCE_INIT;
static const char *cainfo, *cainfo_from, *capath;

/*
 * A copy: a later putenv() may free the environment's string (Python's os.environ does, on
 * replacing a value) while handles are still being set up from it. Out of memory at the
 * first request: no CA of the user's, and the refusal names the system's store.
 */
static const char *env(const char *name)
{
	const char *v = getenv(name);

	return v && v[0] ? strdup(v) : NULL;
}

static void trust_load(void)
{
	static const char *const files[] = { "AWS_CA_BUNDLE", "CURL_CA_BUNDLE", "SSL_CERT_FILE" };
	size_t i;

	for (i = 0; i < sizeof(files) / sizeof(files[0]) && !cainfo; i++) {
		cainfo = env(files[i]);
		cainfo_from = files[i];
	}
	capath = env("SSL_CERT_DIR");
}

void grist_tls_trust(CURL *easy)
{
	pthread_once(&trust_once, trust_load);
	if (cainfo)
		curl_easy_setopt(easy, CURLOPT_CAINFO, cainfo);
	if (capath)
		curl_easy_setopt(easy, CURLOPT_CAPATH, capath);
}

/*
 * A handshake that the transport ended (a reset, an EOF, a failed send or receive), not a
 * refusal of TLS's: a server or balancer that dropped the connection under load, as a reset
 * before a plain http answer is. curl 7.88 says which only in its words: "Recv failure:
 * Connection reset by peer", "OpenSSL SSL_connect: SSL_ERROR_SYSCALL in connection to ..."
 * (an EOF without an alert), "unexpected eof while reading" (OpenSSL 3's words for the same).
 */
static bool cut_short(const char *why)
{
	static const char *const words[] = { "Recv failure", "Send failure", "SSL_ERROR_SYSCALL", "unexpected eof",
					     "Connection reset" };
	size_t i;

	for (i = 0; i < sizeof(words) / sizeof(words[0]); i++)
		if (strstr(why, words[i]))
			return true;
	return false;
}

int grist_tls_failure(CURLcode rc, const char *host, const char *why, char *out, size_t cap)
{
	const char *hint = "";
	char given[512] = "";

	switch (rc) {
	case CURLE_PEER_FAILED_VERIFICATION:
	case CURLE_SSL_ISSUER_ERROR:
	case CURLE_SSL_INVALIDCERTSTATUS:
	case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
		hint = "the server's certificate was refused";
		break;
	case CURLE_SSL_CACERT_BADFILE:
	case CURLE_SSL_CRL_BADFILE:
		hint = "the CA bundle could not be read";
		break;
	case CURLE_SSL_CONNECT_ERROR:
		if (cut_short(why)) {
			snprintf(out, cap, "TLS with %s: the connection was cut during the handshake: %s", host, why);
			return -ECONNRESET;
		}
		hint = "the TLS handshake failed";
		break;
	case CURLE_SSL_CERTPROBLEM:
	case CURLE_SSL_CIPHER:
	case CURLE_SSL_ENGINE_NOTFOUND:
	case CURLE_SSL_ENGINE_SETFAILED:
	case CURLE_SSL_ENGINE_INITFAILED:
	case CURLE_SSL_SHUTDOWN_FAILED:
	case CURLE_SSL_CLIENTCERT:
		hint = "the TLS handshake failed";
		break;
	default:
		return 0;
	}
	pthread_once(&trust_once, trust_load);
	if (cainfo || capath)
		snprintf(given, sizeof(given), "; CAs from %s%s%s%s%s%s", cainfo ? cainfo_from : "", cainfo ? "=" : "",
			 cainfo ? cainfo : "", cainfo && capath ? " and " : "", capath ? "SSL_CERT_DIR=" : "",
			 capath ? capath : "");
	else
		snprintf(given, sizeof(given), "; CAs: the system's (a private CA's PEM file goes in AWS_CA_BUNDLE, "
			 "CURL_CA_BUNDLE or SSL_CERT_FILE)");
	snprintf(out, cap, "TLS with %s: %s: %s%s", host, hint, why, given);
	return -EPROTO;
}
