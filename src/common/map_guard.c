/* SIGBUS from a mapped file becomes an error: per-thread guards and the one chained handler. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
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
static pthread_mutex_t arm_lock = PTHREAD_MUTEX_INITIALIZER;
static bool installed;            /* under arm_lock */
static _Thread_local bool armed;  /* this thread has checked that the handler is in place */

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

static bool is_ours(const struct sigaction *sa)
{
	return (sa->sa_flags & SA_SIGINFO) && sa->sa_sigaction == on_sigbus;
}

/*
 * Put the handler in place: the first time over whatever is there (which it chains to),
 * and after that again only where the default action is back. Code that saved the
 * disposition before grist's first guard and restores it later (faulthandler.disable()
 * after faulthandler.enable(), a test harness around each test) puts SIG_DFL back and
 * takes grist's handler away with it: the next thread that guards a mapping re-arms, so
 * a later loader's faults are errors again, not deaths. Another handler found in our
 * place is left alone: it may chain to ours, and chaining to it in turn would loop.
 * Called once per thread (and per verify): a syscall under a lock, never per decode step.
 */
static void arm(void)
{
	struct sigaction cur, sa;

	pthread_mutex_lock(&arm_lock);
	if (sigaction(SIGBUS, NULL, &cur) == 0 && !is_ours(&cur) &&
	    (!installed || (!(cur.sa_flags & SA_SIGINFO) && cur.sa_handler == SIG_DFL))) {
		memset(&sa, 0, sizeof(sa));
		sa.sa_sigaction = on_sigbus;
		sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
		sigemptyset(&sa.sa_mask);
		if (sigaction(SIGBUS, &sa, &previous) == 0)
			installed = true;
	}
	pthread_mutex_unlock(&arm_lock);
	armed = true;
}

void grist_map_guard_push(struct grist_map_guard *g, const struct grist_map_range *ranges, size_t n)
{
	if (!armed)
		arm();
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
	arm(); /* verify walks a whole file per call: checking each time costs nothing there */
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
	sigset_t bus;

	/*
	 * The handler is installed with SA_NODEFER, so the kernel did not block SIGBUS while it
	 * ran and sigsetjmp(env, 0) need not save the mask (a syscall per guard). But a runtime
	 * that interposes on signals (ThreadSanitizer delivers through its own handler, without
	 * our flags) may have blocked it, and siglongjmp(env, 0) leaves it so: the thread's next
	 * fault would then kill the process. Unblocking here costs a syscall on this failure
	 * path only.
	 */
	sigemptyset(&bus);
	sigaddset(&bus, SIGBUS);
	pthread_sigmask(SIG_UNBLOCK, &bus, NULL);

	grist_map_guard_pop(g);
	return grist_fail_at(-EIO, r->path, offset,
			     "the file cannot be read through its memory map (SIGBUS): it shrank or its storage "
			     "failed while mapped (io=\"mmap\" needs files that stay as they are)");
}
