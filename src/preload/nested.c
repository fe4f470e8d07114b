/* Heap calls a signal handler makes while its thread is recording.
 *
 * A program's signal handler may call malloc and free (not
 * async-signal-safe by POSIX, but glibc's work when the signal did not
 * interrupt glibc itself, and programs do it).  If the signal lands while
 * the thread is writing a record (ht_tls.guard is HT_GUARD_REC: the
 * record's bytes, the pointer and time bases, the buffer's position are
 * half updated), the handler's call cannot be written then.  It used to be
 * left out, silently: a timer every 50 us whose handler did a malloc/free
 * pair lost 39% of the handler's calls on a malloc/free loop
 * (docs/record.md, "Signal handlers that allocate").
 *
 * Now the hook keeps the call here, in the thread's TLS, with its values
 * and its time taken in the handler, and sets t->end to NULL: the next
 * record of the thread (the one interrupted, if it had not passed its
 * room check yet, else the next one) leaves the fast path on its room
 * check and writes the kept calls first (ht_nested__drain).  A block a
 * kept call hands out or releases is forgotten by the order table, so
 * that the next event on it in another thread takes the clock (order.c):
 * the merged order stays that of the real calls.  Up to HT_NESTED_MAX
 * calls wait, in a ring (a handler may keep more while they are being
 * written); more (or a call from a signal nested in another handler
 * while it keeps one) are counted in the trace header's `dropped`, which
 * every analyzer reports.  Calls a handler makes while the tracer does
 * its own work (HT_GUARD_OWN: its start, a flush made in the thread) are
 * neither recorded nor counted: they cannot be told from the tracer's own
 * allocations there. */
#include "preload.h"

void ht_nested__drop(void)
{
	if (atomic_load_explicit(&ht_on, memory_order_relaxed))
		atomic_fetch_add_explicit(ht_dropped_p, 1, memory_order_relaxed);
}

void ht_nested__keep(struct ht_tls *t, int kind, int flags, uint64_t ts, const uint64_t *v,
		     unsigned nv)
{
	if (!atomic_load_explicit(&ht_on, memory_order_relaxed))
		return;
	/* (the sampler and --durations keep state across the interrupted
	 * call: their calls are counted, not kept; so is the call of a signal
	 * that came while another handler was keeping one) */
	if (t->state != 1 || t->nested_keeping ||
	    t->nested_head - t->nested_tail >= HT_NESTED_MAX || ht_opt.sample_bytes ||
	    ht_opt.durations) {
		ht_nested__drop();
		return;
	}
	t->nested_keeping = 1;
	atomic_signal_fence(memory_order_seq_cst);
	struct ht_nested_call *c = &t->nested[t->nested_head % HT_NESTED_MAX];
	c->kind = (uint8_t)kind;
	c->flags = (uint8_t)flags;
	c->ts = ts;
	for (unsigned i = 0; i < nv && i < 6; i++)
		c->v[i] = v[i];
	atomic_signal_fence(memory_order_seq_cst);
	t->nested_head = t->nested_head + 1;
	t->end = NULL; /* the next record leaves the fast path and drains */
	atomic_signal_fence(memory_order_seq_cst);
	t->nested_keeping = 0;
}

void ht_nested__drain(struct ht_tls *t)
{
	t->nested_draining = 1;
	atomic_signal_fence(memory_order_seq_cst);
	/* (a handler may keep more meanwhile: they are taken too) */
	while (t->nested_tail != t->nested_head) {
		struct ht_nested_call c = t->nested[t->nested_tail % HT_NESTED_MAX];
		atomic_signal_fence(memory_order_seq_cst);
		t->nested_tail = t->nested_tail + 1;
		atomic_signal_fence(memory_order_seq_cst);
		/* (the encoder takes a new buffer if need be, and dates the call
		 * no earlier than the record before: it was dated in the handler) */
		ht_nested__write(t, c.kind, c.flags, c.ts, c.v);
	}
	atomic_signal_fence(memory_order_seq_cst);
	t->nested_draining = 0;
	atomic_signal_fence(memory_order_seq_cst);
	if (ht_nested__pending(t))
		t->end = NULL; /* (kept after the last look) */
}
