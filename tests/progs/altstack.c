/* A SIGSEGV handler on an alternate signal stack of 8 KiB (the classic
 * SIGSTKSZ; an AVX-512 signal frame takes some 3 KiB of it; argv[1]
 * another size) that
 * allocates: 200 times, the main thread touches a PROT_NONE page, the
 * handler makes malloc(64)/free and siglongjmps back.  With --stacks the
 * recorder takes the handler's stacks on that small stack.
 *   malloc 201 (the 8 KiB stack, then the handler's), free 200, mmap 1;
 *   exits 0. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "tp.h"

static sigjmp_buf back;
static volatile int handled;

static void on_segv(int sig, siginfo_t *si, void *uc)
{
	(void)sig, (void)si, (void)uc;
	char *p = tp_keep(malloc(64));
	if (p)
		memset(p, 1, 64);
	free(p);
	handled++;
	siglongjmp(back, 1);
}

int main(int argc, char **argv)
{
	size_t size = argc > 1 ? tp_atoul(argv[1]) : 8192;
	stack_t ss = {.ss_sp = tp_keep(malloc(size)), .ss_size = size, .ss_flags = 0};
	TP_CHECK(ss.ss_sp && sigaltstack(&ss, NULL) == 0);
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_segv;
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
	TP_CHECK(sigaction(SIGSEGV, &sa, NULL) == 0);
	volatile char *bad = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	TP_CHECK(bad != MAP_FAILED);
	for (int i = 0; i < 200; i++)
		if (!sigsetjmp(back, 1))
			bad[0] = 1;
	TP_CHECK(handled == 200);
	tp_say_num("handled", (unsigned long long)handled);
	return 0;
}
