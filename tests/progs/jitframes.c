/* jitframes ROUNDS [map]: allocations under frames that no unwind information
 * covers, as a JIT's code and a virtual machine's hand-written stubs make
 * them (cases_stacks.py, unwind_jit_frames).  Each round:
 *   jit_frame(leaf, 100)   code copied into an anonymous executable
 *                          mapping (no module): push rbp; mov rbp, rsp;
 *                          call leaf(100); pop rbp; ret
 *   stub_frame(leaf, 200)  the same code in this program's .text, with no
 *                          FDE (assembly without .cfi directives)
 *   leaf(300)              directly
 * leaf mallocs its size and frees it: 3 mallocs and 3 frees a round.
 * With "map", the program writes /tmp/perf-PID.map as a JIT does for perf:
 * one line, "ADDR e jit_frame_code" (the copied code, 14 bytes).
 * x86-64 only. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tp.h"

typedef void (*leaf_fn)(long);
typedef void (*frame_fn)(leaf_fn, long);

/* the frame's code: rdi the function, rsi its argument */
static const unsigned char frame_code[] = {
	0x55,             /* push %rbp */
	0x48, 0x89, 0xe5, /* mov %rsp, %rbp */
	0x48, 0x89, 0xf8, /* mov %rdi, %rax */
	0x48, 0x89, 0xf7, /* mov %rsi, %rdi */
	0xff, 0xd0,       /* call *%rax */
	0x5d,             /* pop %rbp */
	0xc3,             /* ret */
};

void stub_frame(leaf_fn fn, long arg);
__asm__(".text\n"
	".globl stub_frame\n"
	".type stub_frame, @function\n"
	"stub_frame:\n"
	"\tpush %rbp\n"
	"\tmov %rsp, %rbp\n"
	"\tmov %rdi, %rax\n"
	"\tmov %rsi, %rdi\n"
	"\tcall *%rax\n"
	"\tpop %rbp\n"
	"\tret\n"
	".size stub_frame, .-stub_frame\n");

static __attribute__((noinline)) void leaf(long n)
{
	void *p = tp_keep(malloc((size_t)n));
	TP_CHECK(p != NULL);
	free(p);
	__asm__ volatile("" ::: "memory");
}

int main(int argc, char **argv)
{
	TP_CHECK(argc == 2 || (argc == 3 && !strcmp(argv[2], "map")));
	unsigned long rounds = tp_atoul(argv[1]);
	void *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	TP_CHECK(page != MAP_FAILED);
	memcpy(page, frame_code, sizeof(frame_code));
	TP_CHECK(mprotect(page, 4096, PROT_READ | PROT_EXEC) == 0);
	frame_fn jit_frame = (frame_fn)page;
	if (argc == 3) {
		char path[64];
		snprintf(path, sizeof(path), "/tmp/perf-%d.map", (int)getpid());
		FILE *f = fopen(path, "w");
		TP_CHECK(f != NULL);
		fprintf(f, "%lx %zx jit_frame_code\n", (unsigned long)(uintptr_t)page,
			sizeof(frame_code));
		TP_CHECK(fclose(f) == 0);
	}
	for (unsigned long i = 0; i < rounds; i++) {
		jit_frame(leaf, 100);
		stub_frame(leaf, 200);
		leaf(300);
	}
	__asm__ volatile("" ::: "memory");
	return 0;
}
