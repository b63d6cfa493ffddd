/* SIGBUS from a mapped file becomes an error: per-thread guards and the one chained handler. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>

#include "common/error.h"
#include "common/map_guard.h"

static _Thread_local struct grist_map_guard *current;
/*
 * Set once a guard was ever pushed: before that a SIGBUS never touches the thread-locals.
 * Set once and never cleared, so pushing and popping write nothing that threads share (a
 * counter here cost the decode threads a cache line bouncing between them per decode step).
 */
static int any_guard;
static struct sigaction previous;
static pthread_once_t install_once = PTHREAD_ONCE_INIT;

/* Hand a SIGBUS that no guard claims to whoever had it before, as if we were not here. */
static void chain(int sig, siginfo_t *si, void *uc)
{
	if (previous.sa_flags & SA_SIGINFO) {
		if (previous.sa_sigaction) {
			previous.sa_sigaction(sig, si, uc);
			return;
		}
	} else if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN) {
		previous.sa_handler(sig);
		return;
	}
	/*
	 * The default action: a fault re-executes its instruction once this returns and then
	 * kills the process with SIGBUS; a SIGBUS that was sent (kill, raise) is sent again.
	 * (SIG_IGN cannot apply to a fault: the instruction would fault forever.)
	 */
	signal(SIGBUS, SIG_DFL);
	if (si->si_code <= 0)
		raise(sig);
}

/*
 * Only a fault (si_code > 0) in a guarded range jumps. Reading `current` here is the one
 * thread-local access in a signal handler: in a thread that never pushed a guard it may
 * make the thread-local block of a dlopen()ed libgrist (the Python module) first, which
 * is not async-signal-safe; such a SIGBUS is not grist's, and was on its way to the
 * previous handler or the default death anyway.
 */
static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
	struct grist_map_guard *g;
	uintptr_t a = (uintptr_t)si->si_addr;
	size_t i;

	if (__atomic_load_n(&any_guard, __ATOMIC_ACQUIRE) && si->si_code > 0) {
		for (g = current; g; g = g->prev) {
			for (i = 0; i < g->num_ranges; i++) {
				uintptr_t lo = (uintptr_t)g->ranges[i].base;

				if (a >= lo && a - lo < g->ranges[i].len) {
					g->fault_addr = a;
					g->fault_range = i;
					/* SA_NODEFER: SIGBUS is not blocked here, so the mask needs no restore */
					siglongjmp(g->env, 1);
				}
			}
		}
	}
	chain(sig, si, uc);
}

static void install(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_sigbus;
	sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGBUS, &sa, &previous);
}

void grist_map_guard_push(struct grist_map_guard *g, const struct grist_map_range *ranges, size_t n)
{
	pthread_once(&install_once, install);
	g->ranges = ranges;
	g->num_ranges = n;
	g->fault_addr = 0;
	g->fault_range = 0;
	g->prev = current;
	current = g;
	if (!__atomic_load_n(&any_guard, __ATOMIC_RELAXED))
		__atomic_store_n(&any_guard, 1, __ATOMIC_RELEASE);
}

void grist_map_guard_push_one(struct grist_map_guard *g, const void *base, size_t len, const char *path)
{
	g->one = (struct grist_map_range){ .base = base, .len = len, .path = path };
	grist_map_guard_push(g, &g->one, 1);
}

void grist_map_guard_pop(struct grist_map_guard *g)
{
	current = g->prev;
}

int grist_map_guard_fail(struct grist_map_guard *g)
{
	const struct grist_map_range *r = &g->ranges[g->fault_range];
	uint64_t offset = (uint64_t)(g->fault_addr - (uintptr_t)r->base);

	grist_map_guard_pop(g);
	return grist_fail_at(-EIO, r->path, offset,
			     "the file cannot be read through its memory map (SIGBUS): it shrank or its storage "
			     "failed while mapped (io=\"mmap\" needs files that stay as they are)");
}
