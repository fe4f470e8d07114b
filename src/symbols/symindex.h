/* The ELF symbol of an address in microseconds: a module's symbols sorted
 * once by address, answering what libdwfl's dwfl_module_addrinfo answers
 * (the same symbol, by the same rules) without its scan of the whole
 * table for every address. */
#ifndef HEAPTRAIL_SYMBOLS_SYMINDEX_H
#define HEAPTRAIL_SYMBOLS_SYMINDEX_H

#include <elfutils/libdwfl.h>
#include <stdint.h>

struct ht_symindex; /* opaque */

/* The index of dm's symbol table (built here, once); NULL if dm has none
 * or out of memory (lookups then go to libdwfl). */
struct ht_symindex *ht_symindex__new(Dwfl_Module *dm);
void ht_symindex__free(struct ht_symindex *x);

/* The name of the symbol dwfl_module_addrinfo(dm, addr, ...) names, and
 * addr's offset in it.  The index answers itself when a symbol with a
 * size holds addr (return addresses inside functions: nearly every
 * address); otherwise, where libdwfl's rules for labels without a size
 * depend on the order of the whole table, it asks libdwfl.  x may be NULL
 * (then always libdwfl). */
const char *ht_symindex__lookup(const struct ht_symindex *x, Dwfl_Module *dm, uint64_t addr,
				uint64_t *offset);

#endif
