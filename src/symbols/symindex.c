/* The sorted symbol index (symindex.h).
 *
 * libdwfl's dwfl_module_addrinfo looks at every symbol of the module for
 * each address: the global ones first ([first_global, syments), or from 1
 * when the table has no locals), then, if none of those holds the
 * address, the local ones.  Among the symbols with a size that hold the
 * address, in table order, it keeps a symbol over the one kept before if
 * it starts later or binds more strongly (global > weak > local), or, at
 * the same start, if it is smaller and binds at least as strongly, or is
 * no larger and binds more strongly.  Symbols without a size (assembly
 * labels) count only when no sized symbol holds the address, under rules
 * that depend on where each lies in the table.
 *
 * The index keeps the global pass's sized symbols sorted by start, with
 * the largest end of all those up to each position: the symbols that hold
 * addr are found by a binary search and a short walk back (it stops where
 * no symbol before can reach addr), then put in table order and run
 * through the same rules.  When none holds addr the answer is libdwfl's
 * own (the local pass and the labels), so it is the same in every case. */
#define _GNU_SOURCE
#include "symindex.h"

#include <gelf.h>
#include <stdlib.h>
#include <string.h>

struct sym {
	uint64_t value, end; /* [value, end): where it is, as dwfl_module_addrinfo sees it */
	uint64_t size;       /* end - value */
	const char *name;    /* libdwfl's (valid while the Dwfl lives) */
	uint32_t ndx;        /* its index in the table: the order of the rules */
	int bind;            /* 3 global, 2 weak, 1 local, 0 other (libdwfl's ranking) */
	int abs;             /* in no section (SHN_ABS and the like): a label of it only
			      * ever names its own address */
};

/* The symbols of one of libdwfl's two passes (globals, then locals). */
struct pass {
	struct sym *syms;  /* the sized ones, by value */
	uint64_t *maxend;  /* maxend[i]: the largest end of syms[0..i] */
	size_t n;
	struct sym *labels; /* the sizeless ones, by value (end = value) */
	size_t nlabels;
};

struct ht_symindex {
	struct pass pass[2]; /* [0] globals (or the whole table), [1] locals */
	int has_locals;      /* libdwfl makes a second pass (first_global > 1) */
};

static int bind_rank(const GElf_Sym *s)
{
	switch (GELF_ST_BIND(s->st_info)) {
	case STB_GLOBAL: return 3;
	case STB_WEAK: return 2;
	case STB_LOCAL: return 1;
	default: return 0;
	}
}

static int by_value(const void *a, const void *b)
{
	const struct sym *x = a, *y = b;
	if (x->value != y->value)
		return x->value < y->value ? -1 : 1;
	return x->ndx < y->ndx ? -1 : x->ndx > y->ndx;
}

static int by_ndx(const void *a, const void *b)
{
	const struct sym *x = *(const struct sym *const *)a, *y = *(const struct sym *const *)b;
	return x->ndx < y->ndx ? -1 : x->ndx > y->ndx;
}

static int fill_pass(struct pass *p, Dwfl_Module *dm, int from, int to)
{
	size_t cap = to > from ? (size_t)(to - from) : 0;
	p->syms = malloc((cap ? cap : 1) * sizeof(*p->syms));
	p->labels = malloc((cap ? cap : 1) * sizeof(*p->labels));
	if (!p->syms || !p->labels)
		return -1;
	for (int i = from; i < to; i++) {
		GElf_Sym s;
		GElf_Addr value;
		GElf_Word shndx;
		Elf *elf;
		Dwarf_Addr bias;
		const char *name = dwfl_module_getsym_info(dm, i, &s, &value, &shndx, &elf, &bias);
		if (!name || !name[0] || s.st_shndx == SHN_UNDEF ||
		    GELF_ST_TYPE(s.st_info) == STT_SECTION || GELF_ST_TYPE(s.st_info) == STT_FILE ||
		    GELF_ST_TYPE(s.st_info) == STT_TLS || value + s.st_size < value)
			continue;
		struct sym e = {value, value + s.st_size, s.st_size, name, (uint32_t)i, bind_rank(&s),
				shndx >= SHN_LORESERVE};
		if (s.st_size)
			p->syms[p->n++] = e;
		else
			p->labels[p->nlabels++] = e;
	}
	qsort(p->syms, p->n, sizeof(*p->syms), by_value);
	qsort(p->labels, p->nlabels, sizeof(*p->labels), by_value);
	p->maxend = malloc((p->n ? p->n : 1) * sizeof(*p->maxend));
	if (!p->maxend)
		return -1;
	uint64_t m = 0;
	for (size_t i = 0; i < p->n; i++) {
		if (p->syms[i].end > m)
			m = p->syms[i].end;
		p->maxend[i] = m;
	}
	return 0;
}

struct ht_symindex *ht_symindex__new(Dwfl_Module *dm)
{
	int syments = dwfl_module_getsymtab(dm);
	int first_global = dwfl_module_getsymtab_first_global(dm);
	if (syments <= 1 || first_global < 0)
		return NULL;
	struct ht_symindex *x = calloc(1, sizeof(*x));
	if (!x)
		return NULL;
	x->has_locals = first_global > 1;
	if (fill_pass(&x->pass[0], dm, first_global == 0 ? 1 : first_global, syments) < 0 ||
	    (x->has_locals && fill_pass(&x->pass[1], dm, 1, first_global) < 0)) {
		ht_symindex__free(x);
		return NULL;
	}
	return x;
}

void ht_symindex__free(struct ht_symindex *x)
{
	if (!x)
		return;
	for (int i = 0; i < 2; i++) {
		free(x->pass[i].syms);
		free(x->pass[i].maxend);
		free(x->pass[i].labels);
	}
	free(x);
}

/* The sized symbol libdwfl keeps among those that hold the address, taken
 * in table order (try_sym_value's rules for sized symbols). */
static const struct sym *choose(const struct sym *const *c, size_t n)
{
	const struct sym *best = NULL;
	for (size_t i = 0; i < n; i++) {
		const struct sym *s = c[i];
		if (!best || best->value < s->value || best->bind < s->bind)
			best = s;
		else if (best->value == s->value &&
			 ((best->size > s->size && best->bind <= s->bind) ||
			  (best->size >= s->size && best->bind < s->bind)))
			best = s;
	}
	return best;
}

#define MAX_HOLDERS 64 /* symbols holding one address (aliases); more: libdwfl */
#define MAX_WALK 4096  /* symbols looked at below the address; more: libdwfl */

/* The index of the first symbol of syms[0..n) starting above addr. */
static size_t upper(const struct sym *syms, size_t n, uint64_t addr)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (syms[mid].value <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The sized symbols of pass p that hold addr, in table order, into
 * holders; how many, or -1 when there are too many to look at here. */
static int holders_of(const struct pass *p, uint64_t addr, const struct sym **holders,
		      uint64_t *maxend)
{
	size_t lo = upper(p->syms, p->n, addr), nh = 0, steps = 0;
	*maxend = lo ? p->maxend[lo - 1] : 0;
	for (size_t i = lo; i-- > 0 && p->maxend[i] > addr;) {
		if (++steps > MAX_WALK)
			return -1; /* a huge symbol below: libdwfl is as quick */
		if (addr < p->syms[i].end) {
			if (nh == MAX_HOLDERS)
				return -1;
			holders[nh++] = &p->syms[i];
		}
	}
	if (nh > 1)
		qsort(holders, nh, sizeof(*holders), by_ndx);
	return (int)nh;
}

/* The section libdwfl finds at address a (NULL: none), as its
 * same_section compares them. */
static Elf_Scn *section_at(Dwfl_Module *dm, uint64_t a)
{
	Dwarf_Addr at = a, bias;
	return dwfl_module_address_section(dm, &at, &bias);
}

/* The label of pass p at exactly value v that libdwfl would keep last:
 * the last in table order of those in addr's section (a label in no
 * section only at addr itself); NULL if none. */
static const struct sym *label_at(const struct pass *p, Dwfl_Module *dm, uint64_t v,
				  uint64_t addr)
{
	size_t hi = upper(p->labels, p->nlabels, v);
	const struct sym *best = NULL;
	int same = -1; /* v's section is addr's: not known yet */
	for (size_t i = hi; i-- > 0 && p->labels[i].value == v;) {
		const struct sym *l = &p->labels[i];
		if (best && l->ndx < best->ndx)
			continue;
		if (l->abs) {
			if (v != addr)
				continue;
		} else if (v != addr) {
			if (same < 0)
				same = section_at(dm, v) == section_at(dm, addr);
			if (!same)
				continue;
		}
		best = l;
	}
	return best;
}

/* The largest end (value for labels) of the pass's symbols at or below addr. */
static uint64_t max_end(const struct pass *p, uint64_t sized_maxend, uint64_t addr)
{
	size_t k = upper(p->labels, p->nlabels, addr);
	uint64_t m = sized_maxend;
	if (k && p->labels[k - 1].value > m)
		m = p->labels[k - 1].value;
	return m;
}

const char *ht_symindex__lookup(const struct ht_symindex *x, Dwfl_Module *dm, uint64_t addr,
				uint64_t *offset)
{
	const struct sym *holders[MAX_HOLDERS];
	uint64_t me0, me1 = 0;
	int nh;
	if (!x || (nh = holders_of(&x->pass[0], addr, holders, &me0)) < 0)
		goto libdwfl;
	if (!nh) {
		/* libdwfl's second pass, unless a global label sits at addr */
		int second = x->has_locals && !label_at(&x->pass[0], dm, addr, addr);
		if (second && (nh = holders_of(&x->pass[1], addr, holders, &me1)) < 0)
			goto libdwfl;
		if (!nh) {
			/* a label: at the highest end below addr, the last there */
			uint64_t m = max_end(&x->pass[0], me0, addr);
			if (second && max_end(&x->pass[1], me1, addr) > m)
				m = max_end(&x->pass[1], me1, addr);
			const struct sym *l = second ? label_at(&x->pass[1], dm, m, addr) : NULL;
			if (!l)
				l = label_at(&x->pass[0], dm, m, addr);
			if (!l || !(x->pass[0].n + x->pass[0].nlabels + x->pass[1].n + x->pass[1].nlabels))
				return NULL;
			*offset = addr - l->value;
			return l->name;
		}
	}
	const struct sym *s = choose(holders, (size_t)nh);
	*offset = addr - s->value;
	return s->name;
libdwfl:;
	GElf_Off off = 0;
	GElf_Sym sym;
	const char *name = dwfl_module_addrinfo(dm, addr, &off, &sym, NULL, NULL, NULL);
	*offset = off;
	return name;
}
