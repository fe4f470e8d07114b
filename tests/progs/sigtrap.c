/* Stacks through a signal frame (cases_stacks.py, stacks_through_signal_frames):
 * two functions in assembly stop on ud2, and the SIGILL handler allocates
 * (kept: they are leaks to look at) and steps over it.  trap_first stops at
 * its first instruction, so that the address before it belongs to another
 * function; trap_pushed after a push, so that the frame must be stepped
 * with the rule at the instruction, not the one before (the CFA moved).
 * The handler allocates 6161 bytes in trap_first, 6262 in trap_pushed,
 * called from call_first and call_pushed. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <ucontext.h>

void trap_first(void);
void trap_pushed(void);
void call_first(void);
void call_pushed(void);

__asm__(".text\n"
	".globl trap_first\n.type trap_first,@function\ntrap_first:\n.cfi_startproc\n"
	"ud2\nret\n.cfi_endproc\n.size trap_first,.-trap_first\n"
	".globl trap_pushed\n.type trap_pushed,@function\ntrap_pushed:\n.cfi_startproc\n"
	"push %rbx\n.cfi_def_cfa_offset 16\n.cfi_offset %rbx, -16\nud2\npop %rbx\n"
	".cfi_def_cfa_offset 8\nret\n.cfi_endproc\n.size trap_pushed,.-trap_pushed\n");

static void *volatile keep[2];
static volatile int traps;

static void handler(int sig, siginfo_t *si, void *ucv)
{
	(void)sig;
	(void)si;
	ucontext_t *uc = ucv;
	keep[traps] = malloc(traps == 0 ? 6161 : 6262);
	traps++;
	uc->uc_mcontext.gregs[REG_RIP] += 2; /* over the ud2 */
}

__attribute__((noinline)) void call_first(void)
{
	trap_first();
	__asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void call_pushed(void)
{
	trap_pushed();
	__asm__ volatile("" ::: "memory");
}

int main(void)
{
	struct sigaction sa = {0};
	sa.sa_sigaction = handler;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGILL, &sa, NULL) != 0)
		return 1;
	call_first();
	call_pushed();
	printf("traps=%d\n", traps);
	return traps == 2 ? 0 : 1;
}
