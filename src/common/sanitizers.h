/* The sanitizers whose runtime, a shared library, replaces malloc and
 * must be the first library loaded: a program that needs one cannot run
 * with the recorder preloaded.  Header-only: record checks the program it
 * starts (src/cli/cmd_record.c), the preload library the images a traced
 * process execs (src/preload/execcheck.c). */
#ifndef HEAPTRAIL_COMMON_SANITIZERS_H
#define HEAPTRAIL_COMMON_SANITIZERS_H

#include <string.h>

/* The runtimes' library names (prefixes of DT_NEEDED entries), NULL-ended. */
static inline const char *const *ht_sanitizer_runtimes(void)
{
	static const char *const runtimes[] = {
		"libasan.so",	    "libtsan.so",	"liblsan.so",
		"libhwasan.so",	    "libclang_rt.asan", "libclang_rt.tsan",
		"libclang_rt.msan", "libclang_rt.lsan", "libclang_rt.hwasan",
		NULL};
	return runtimes;
}

/* The sanitizer of a runtime library named as above. */
static inline const char *ht_sanitizer_name(const char *lib)
{
	return strstr(lib, "hwasan")  ? "HWAddressSanitizer"
	       : strstr(lib, "asan")  ? "AddressSanitizer"
	       : strstr(lib, "tsan")  ? "ThreadSanitizer"
	       : strstr(lib, "msan")  ? "MemorySanitizer"
				      : "LeakSanitizer";
}

#endif
