/* Thread-local error messages and the code-to-text table. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/error.h"
#include "grist_config.h"

#define GRIST_ERROR_MESSAGE_MAX 1024

static _Thread_local char last_message[GRIST_ERROR_MESSAGE_MAX];

/* Append @text to the message at @at; long messages are cut, never overflowed. */
static size_t append(size_t at, const char *text)
{
	size_t n = strlen(text);

	if (at >= sizeof(last_message) - 1)
		return at;
	if (n > sizeof(last_message) - 1 - at)
		n = sizeof(last_message) - 1 - at;
	memmove(last_message + at, text, n);
	last_message[at + n] = '\0';
	return at + n;
}

static void set_message(const char *prefix, const char *fmt, va_list ap)
{
	char body[GRIST_ERROR_MESSAGE_MAX];

	vsnprintf(body, sizeof(body), fmt, ap);
	append(append(0, prefix ? prefix : ""), body);
}

int grist_fail(int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	set_message(NULL, fmt, ap);
	va_end(ap);
	return code;
}

int grist_fail_at(int code, const char *path, uint64_t offset, const char *fmt, ...)
{
	char prefix[512];
	va_list ap;

	snprintf(prefix, sizeof(prefix), "%s: byte %llu: ", path ? path : "(unnamed)",
		 (unsigned long long)offset);
	va_start(ap, fmt);
	set_message(prefix, fmt, ap);
	va_end(ap);
	return code;
}

int grist_fail_prefix(int code, const char *fmt, ...)
{
	char prefix[GRIST_ERROR_MESSAGE_MAX];
	char old[GRIST_ERROR_MESSAGE_MAX];
	va_list ap;
	size_t n;

	va_start(ap, fmt);
	vsnprintf(prefix, sizeof(prefix), fmt, ap);
	va_end(ap);
	memcpy(old, last_message, sizeof(old));
	n = append(0, prefix);
	n = append(n, ": ");
	append(n, old[0] ? old : grist_strerror(code));
	return code;
}

const char *grist_strerror(int code)
{
	switch (code) {
	case 0:
		return "success";
	case -EINVAL:
		return "invalid argument";
	case -EBADMSG:
		return "corrupt data";
	case -ENOTSUP:
		return "unsupported";
	case -ERANGE:
		return "index out of range";
	case -EIO:
		return "I/O error";
	case -ENOMEM:
		return "out of memory";
	case -ENODEV:
		return "no such device";
	case -ESTALE:
		return "checkpoint does not match this dataset or configuration";
	case -ENOENT:
		return "no such file or directory";
	case -EPERM:
		return "operation not permitted";
	case -ENOSYS:
		return "function not implemented";
	case -ECANCELED:
		return "operation canceled";
	default:
		return code < 0 && strerrordesc_np(-code) ? strerrordesc_np(-code) : "unknown error";
	}
}

const char *grist_last_error(void)
{
	return last_message;
}

void grist_clear_error(void)
{
	last_message[0] = '\0';
}

const char *grist_version(void)
{
	return GRIST_VERSION_STRING;
}

unsigned grist_version_number(void)
{
	return GRIST_VERSION_NUMBER;
}
