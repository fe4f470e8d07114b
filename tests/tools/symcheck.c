/* symcheck [-n N] ELF...: for each file, the symbol of many addresses by
 * the symbol index (src/symbols/symindex.c) and by libdwfl's
 * dwfl_module_addrinfo, which the index must answer the same way: around
 * the start and the end of every symbol (of every K-th one when that
 * makes more than N addresses, N = 30000 by default, 0 = all), and at as
 * many addresses spread over the module (20000 at most).  Prints one line per file; exits 1 if any answer differs
 * (ctest symbols.index_*, tests/CMakeLists.txt). */
#define _GNU_SOURCE
#include <elfutils/libdwfl.h>
#include <gelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "symbols/symindex.h"

static long same, differ;

static void check(Dwfl_Module *m, const struct ht_symindex *x, const char *path, uint64_t a)
{
	GElf_Off o1 = 0;
	GElf_Sym s;
	uint64_t o2 = 0;
	const char *n1 = dwfl_module_addrinfo(m, a, &o1, &s, NULL, NULL, NULL);
	const char *n2 = ht_symindex__lookup(x, m, a, &o2);
	int eq = n1 == n2 || (n1 && n2 && !strcmp(n1, n2));
	if (eq && (!n1 || o1 == o2)) {
		same++;
		return;
	}
	if (++differ <= 5)
		printf("%s: at 0x%llx libdwfl says %s+0x%llx, the index %s+0x%llx\n", path,
		       (unsigned long long)a, n1 ? n1 : "(none)", (unsigned long long)o1,
		       n2 ? n2 : "(none)", (unsigned long long)o2);
}

int main(int argc, char **argv)
{
	static const Dwfl_Callbacks cb = {
		.find_elf = dwfl_build_id_find_elf,
		.find_debuginfo = dwfl_standard_find_debuginfo,
		.section_address = dwfl_offline_section_address,
	};
	int bad = 0, first = 1;
	long budget = 30000;
	if (argc > 2 && !strcmp(argv[1], "-n")) {
		budget = atol(argv[2]);
		first = 3;
	}
	if (argc <= first) {
		fprintf(stderr, "usage: symcheck [-n ADDRESSES] ELF...\n");
		return 2;
	}
	for (int f = first; f < argc; f++) {
		Dwfl *d = dwfl_begin(&cb);
		dwfl_report_begin(d);
		Dwfl_Module *m = dwfl_report_elf(d, "m", argv[f], -1, 0x7f0000000000ull, true);
		dwfl_report_end(d, NULL, NULL);
		if (!m) {
			printf("%s: cannot open: %s\n", argv[f], dwfl_errmsg(-1));
			bad = 1;
			dwfl_end(d);
			continue;
		}
		struct ht_symindex *x = ht_symindex__new(m);
		same = differ = 0;
		int n = dwfl_module_getsymtab(m);
		int step = budget > 0 && (long)n * 7 > budget ? (int)((long)n * 7 / budget) + 1 : 1;
		for (int i = 1; i < n; i += step) {
			GElf_Sym s;
			GElf_Addr v;
			GElf_Word sh;
			Elf *e;
			Dwarf_Addr b;
			if (!dwfl_module_getsym_info(m, i, &s, &v, &sh, &e, &b))
				continue;
			uint64_t at[] = {v - 1, v, v + 1, v + s.st_size / 2, v + s.st_size - 1,
					 v + s.st_size, v + s.st_size + 1};
			for (size_t k = 0; k < sizeof(at) / sizeof(at[0]); k++)
				check(m, x, argv[f], at[k]);
		}
		GElf_Addr lo, hi;
		dwfl_module_info(m, NULL, &lo, &hi, NULL, NULL, NULL, NULL);
		uint64_t r = 88172645463325252ull;
		long spread = budget > 0 && budget < 20000 ? budget : 20000;
		for (long k = 0; k < spread && hi > lo; k++) {
			r ^= r << 13, r ^= r >> 7, r ^= r << 17;
			check(m, x, argv[f], lo + r % (hi - lo));
		}
		printf("%s: %d symbols, %ld addresses, %ld differ%s\n", argv[f], n, same + differ,
		       differ, x ? "" : " (no index: libdwfl answered every one)");
		bad |= differ != 0;
		ht_symindex__free(x);
		dwfl_end(d);
	}
	return bad;
}
