/* Names for code in no module: the map a JIT writes for perf,
 * /tmp/perf-PID.map (node --perf-basic-prof, java with perf-map-agent,
 * LuaJIT, .NET with DOTNET_PerfMapEnabled=1).  Each line is
 * "START SIZE NAME", START and SIZE in hex (a 0x before them taken or
 * not), NAME the rest of the line; malformed lines are skipped.  Code can
 * be compiled again at the same addresses: a later line wins over an
 * earlier one that covers the same address. */
#ifndef HEAPTRAIL_SYMBOLS_PERFMAP_H
#define HEAPTRAIL_SYMBOLS_PERFMAP_H

#include <stddef.h>
#include <stdint.h>

struct ht_perfmap; /* opaque */

/* The map of the text buf[0..len) (not NUL-terminated); NULL if out of
 * memory.  A map of no line is valid (and answers nothing). */
struct ht_perfmap *ht_perfmap__parse(const char *buf, size_t len);

/* The map in the regular file path, read whole (at most 1 GiB): NULL if
 * it cannot be read, with the reason in err. */
struct ht_perfmap *ht_perfmap__load(const char *path, char *err, size_t errlen);

void ht_perfmap__free(struct ht_perfmap *m);

/* The entries taken. */
size_t ht_perfmap__count(const struct ht_perfmap *m);

/* The name of the code at addr (the latest entry that covers it), NULL if
 * none.  Valid as long as the map. */
const char *ht_perfmap__lookup(const struct ht_perfmap *m, uint64_t addr);

#endif
