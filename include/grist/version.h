/*
 * grist/version.h - the library's version, and the export marker every public header uses.
 *
 * GRIST_VERSION_* is the version of the headers a caller compiled against;
 * grist_version() and grist_version_number() (grist/error.h) report the library
 * that is running. They may differ: a program built against 0.2 runs on any
 * later library of the same soname (docs/architecture.md, "A stable ABI").
 *
 * GRIST_VERSION_NUMBER is MAJOR * 10000 + MINOR * 100 + PATCH (0.2.0 -> 200), so
 * `#if GRIST_VERSION_NUMBER >= 200` guards code that needs a newer API.
 */
#ifndef GRIST_VERSION_H
#define GRIST_VERSION_H

#define GRIST_VERSION_MAJOR 0
#define GRIST_VERSION_MINOR 2
#define GRIST_VERSION_PATCH 0

#define GRIST_VERSION_NUMBER (GRIST_VERSION_MAJOR * 10000 + GRIST_VERSION_MINOR * 100 + GRIST_VERSION_PATCH)

#define GRIST_STRINGIFY_(x) #x
#define GRIST_STRINGIFY(x) GRIST_STRINGIFY_(x)
#define GRIST_VERSION_STRING                                                                         \
	GRIST_STRINGIFY(GRIST_VERSION_MAJOR) "." GRIST_STRINGIFY(GRIST_VERSION_MINOR) "." GRIST_STRINGIFY( \
		GRIST_VERSION_PATCH)

/* Public functions are exported; everything else in libgrist is hidden (and the linker's
 * version script, src/libgrist.map, exports grist_* only). */
#if defined(__GNUC__)
#define GRIST_API __attribute__((visibility("default")))
#else
#define GRIST_API
#endif

#endif
