/* The log callback: where the library's diagnostics go, since it never prints. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>

#include "common/error.h"

/* The pair changes together under the lock; a message takes a copy and calls outside it. */
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static grist_log_fn log_fn;
static void *log_ctx;

void grist_set_log_callback(grist_log_fn fn, void *ctx)
{
	pthread_mutex_lock(&log_lock);
	log_fn = fn;
	log_ctx = ctx;
	pthread_mutex_unlock(&log_lock);
}

void grist_log(enum grist_log_level level, const char *fmt, ...)
{
	char msg[1024];
	grist_log_fn fn;
	void *ctx;
	va_list ap;

	pthread_mutex_lock(&log_lock);
	fn = log_fn;
	ctx = log_ctx;
	pthread_mutex_unlock(&log_lock);
	if (!fn)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fn(ctx, level, msg);
}
