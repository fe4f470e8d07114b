/* The table of event kinds: names and field layouts (see format.h). */
#include "format.h"

/* Set by the recorder at start-up when the CPU has LZCNT; tools leave it
 * 0 (they only decode). */
int ht_lzcnt;

const struct ht_kind_desc ht_kind_descs[HT_EV_NR] = {
	[HT_EV_SYNC] = {"sync", "u", "seq", -1, 0},
	[HT_EV_MALLOC] = {"malloc", "upU", "size,ptr,usable", 1, 1},
	[HT_EV_FREE] = {"free", "p", "ptr", -1, 0},
	[HT_EV_CALLOC] = {"calloc", "uupU", "nmemb,size,ptr,usable", 2, 1},
	[HT_EV_REALLOC] = {"realloc", "pupUd", "old,size,ptr,usable,duration", 2, 1},
	[HT_EV_REALLOCARRAY] = {"reallocarray", "puupUd", "old,nmemb,size,ptr,usable,duration", 3, 1},
	[HT_EV_MEMALIGN] = {"memalign", "uupU", "align,size,ptr,usable", 2, 1},
	[HT_EV_POSIX_MEMALIGN] = {"posix_memalign", "uupsU", "align,size,ptr,ret,usable", 2, 1},
	[HT_EV_ALIGNED_ALLOC] = {"aligned_alloc", "uupU", "align,size,ptr,usable", 2, 1},
	[HT_EV_VALLOC] = {"valloc", "upU", "size,ptr,usable", 1, 1},
	[HT_EV_PVALLOC] = {"pvalloc", "upU", "size,ptr,usable", 1, 1},
	[HT_EV_MALLOPT] = {"mallopt", "sss", "param,value,ret", 2, 0},
	[HT_EV_MALLOC_TRIM] = {"malloc_trim", "us", "pad,ret", 1, 0},
	[HT_EV_MMAP] = {"mmap", "pussssp", "addr,len,prot,flags,fd,offset,ptr", 6, 0},
	[HT_EV_MUNMAP] = {"munmap", "pus", "addr,len,ret", 2, 0},
	[HT_EV_MREMAP] = {"mremap", "puusppd", "old,oldlen,newlen,flags,newaddr,ptr,duration", 5, 0},
	[HT_EV_BRK] = {"brk", "ps", "addr,ret", 1, 0},
	[HT_EV_SBRK] = {"sbrk", "sp", "incr,ptr", 1, 0},
	[HT_EV_SHMGET] = {"shmget", "suss", "key,size,flags,id", 3, 0},
	[HT_EV_SHMAT] = {"shmat", "spsp", "id,addr,flags,ptr", 3, 0},
	[HT_EV_SHMDT] = {"shmdt", "ps", "addr,ret", 1, 0},
	[HT_EV_SHMCTL] = {"shmctl", "sss", "id,cmd,ret", 2, 0},
	[HT_EV_HEAP_BREAK] = {"heap_break", "p", "brk", -1, 0},
	[HT_EV_THREAD_START] = {"thread_start", "u", "creator", -1, 0},
	[HT_EV_THREAD_EXIT] = {"thread_exit", "", "", -1, 0},
	[HT_EV_THREAD_NAME] = {"thread_name", "S", "name", -1, 0},
	[HT_EV_MARK] = {"mark", "S", "label", -1, 0},
	[HT_EV_CONTROL] = {"control", "u", "op", -1, 0},
	[HT_EV_FORK] = {"fork", "s", "child", -1, 0},
	[HT_EV_EXEC] = {"exec", "S", "path", -1, 0},
	[HT_EV_TICK] = {"tick", "u", "ticks", -1, 0},
	[HT_EV_EXT] = {"ext", "", "", -1, 0}, /* an escape, never a kind of its own */
	[HT_EV_FRAME] = {"frame", "uuu", "id,parent,ip", -1, 0},
	[HT_EV_MODULE] = {"module", "uuuS", "base,lo,hi,path", -1, 0},
	[HT_EV_BUILD_ID] = {"build_id", "uS", "base,id", -1, 0},
	[HT_EV_MODULE_GONE] = {"module_gone", "u", "base", -1, 0},
	[HT_EV_DURATION] = {"duration", "u", "ticks", -1, 0},
};
