/* The order table: which thread recorded the last event on an address.
 *
 * malloc and free take the clock only now and then (preload.h, ts_due);
 * an undated event is placed by its thread's previous timestamp, a lower
 * bound.  That is exact within a thread, but across threads it is exact
 * only if, wherever two consecutive events on one address come from two
 * threads, the later one is dated: then the earlier one's lower bound is
 * below the later one's timestamp, and a merge by (timestamp, thread,
 * sequence) puts them in their real order (docs/FORMAT.md, "Ordering
 * guarantee").  This table tells an event whether that is its case.
 *
 * One 64-bit slot per hash of the address, holding the address's high bits
 * and the dense index of the thread that recorded the last event there.
 * Events on one address are ordered by the program (the block is handed
 * from thread to thread under the program's or glibc's own
 * synchronization) and every recorder store to a slot comes before that
 * hand-off, so an event that finds its own key (its address, its thread)
 * knows that the previous recorded event on the address was its own
 * thread's.  Anything else (another thread, another address in the slot,
 * an empty slot) makes it take the clock and store its key.  Stores and
 * loads are relaxed atomics: plain moves on x86, no lock, no fence.
 *
 * The table is unused (never touched) until a second thread exists. */
#include "preload.h"

HT_HIDDEN _Atomic uint64_t ht_order_tab[1u << HT_ORDER_BITS];
static _Atomic uint64_t next_index = 1;

void ht_order__thread(struct ht_tls *t)
{
	uint64_t i = atomic_fetch_add_explicit(&next_index, 1, memory_order_relaxed);
	t->oidx = i & HT_ORDER_TID_MASK;
	if (HT_UNLIKELY(t->oidx == 0)) /* 2^39 threads: never in practice */
		t->oidx = 1;
}
