/* Call-frame rules from a module's .eh_frame, for the stack walk of
 * `record --stacks` (stacks.c).
 *
 * Every module built for exception handling (all of Debian's, with or
 * without frame pointers) describes, for each address of its code, how to
 * find the caller's frame: the CFA (the stack pointer before the call) as
 * a register plus an offset, and where the return address and the saved
 * registers sit relative to it.  The loader maps that description (the
 * .eh_frame section, indexed by .eh_frame_hdr's sorted search table) with
 * the module's read-only data, so it can be read in place, without a
 * system call or an allocation.
 *
 * ht_cfi__find reads the rule in effect at a return address: a binary
 * search of the table, then the CIE's and FDE's instructions run up to the
 * call.  On x86-64 the walk needs only rsp, rbp and the return address, so
 * the rule is a few bytes (struct ht_cfi), which the walk caches per thread
 * by return address: a warm walk costs one cache probe and one or two
 * stack loads a frame, as a frame-pointer walk does.  What the compact
 * form cannot say (a CFA computed by another expression or from another
 * register, a signal frame, a return address elsewhere than just below the
 * CFA, rbp kept in another register) is HT_CFI_NONE, and the walk leaves
 * that frame to libunwind, so that the stacks stay those libunwind gives.
 *
 * Reads stay inside [lo, hi), the loaded segment that holds the module's
 * .eh_frame_hdr; what does not fit, or does not parse, is HT_CFI_NONE. */
#define _GNU_SOURCE
#include <stdint.h>
#include <string.h>

#include "preload.h"

/* x86-64 DWARF register numbers */
#define REG_RBP 6
#define REG_RSP 7
#define REG_RA 16

struct rd {
	const uint8_t *p, *end;
	int bad;
};

static uint64_t rd_fixed(struct rd *r, unsigned n)
{
	uint64_t v = 0;
	if (r->bad || (size_t)(r->end - r->p) < n) {
		r->bad = 1;
		return 0;
	}
	memcpy(&v, r->p, n); /* little-endian */
	r->p += n;
	return v;
}

/* A LEB128 number's bits; *bits: how many it had, *sign: its sign bit
 * (the last byte's 0x40). */
static uint64_t rd_leb(struct rd *r, unsigned *bits, int *sign)
{
	uint64_t v = 0;
	for (unsigned shift = 0;; shift += 7) {
		if (r->p >= r->end || shift >= 64) {
			r->bad = 1;
			*bits = 0, *sign = 0;
			return 0;
		}
		uint8_t b = *r->p++;
		v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*bits = shift + 7;
			*sign = (b & 0x40) != 0;
			return v;
		}
	}
}

static uint64_t rd_uleb(struct rd *r)
{
	unsigned bits;
	int sign;
	return rd_leb(r, &bits, &sign);
}

static int64_t rd_sleb(struct rd *r)
{
	unsigned bits;
	int sign;
	uint64_t v = rd_leb(r, &bits, &sign);
	if (sign && bits < 64)
		v |= ~(uint64_t)0 << bits;
	return (int64_t)v;
}

/* A DW_EH_PE-encoded pointer: absolute or relative to where it is read
 * (the only two forms x86-64's .eh_frame uses for code addresses). */
static uint64_t rd_encoded(struct rd *r, uint8_t enc)
{
	const uint8_t *at = r->p;
	uint64_t v;
	switch (enc & 0x0f) {
	case 0x00: case 0x04: case 0x0c: v = rd_fixed(r, 8); break;
	case 0x01: v = rd_uleb(r); break;
	case 0x09: v = (uint64_t)rd_sleb(r); break;
	case 0x02: v = rd_fixed(r, 2); break;
	case 0x03: v = rd_fixed(r, 4); break;
	case 0x0a: v = (uint64_t)(int64_t)(int16_t)rd_fixed(r, 2); break;
	case 0x0b: v = (uint64_t)(int64_t)(int32_t)rd_fixed(r, 4); break;
	default: r->bad = 1; return 0;
	}
	switch (enc & 0x70) {
	case 0x00: break;
	case 0x10: v += (uint64_t)(uintptr_t)at; break;
	default: r->bad = 1;
	}
	return v;
}

/* The rules the walk needs, as the CFA program leaves them. */
enum { AT_SAME, AT_CFA, AT_UNDEF, AT_OTHER };
enum { CFA_REG, CFA_RBP_DEREF, CFA_OTHER };

struct row {
	int64_t cfa_off;  /* CFA_REG: cfa_reg + cfa_off; CFA_RBP_DEREF: *(rbp + cfa_off) */
	int64_t rbp_off;  /* rbp_how AT_CFA: saved at CFA + rbp_off */
	int64_t ra_off;   /* ra_how AT_CFA: at CFA + ra_off */
	uint64_t cfa_reg; /* CFA_REG: its DWARF register */
	uint8_t cfa_how;  /* CFA_* */
	uint8_t rbp_how;  /* AT_* */
	uint8_t ra_how;   /* AT_* */
	uint8_t rsp_how;  /* AT_*: anything but AT_SAME is more than the compact form says */
};

struct cie {
	uint64_t caf;             /* code alignment factor */
	int64_t daf;              /* data alignment factor */
	uint64_t ra_reg;          /* return address column */
	const uint8_t *ins, *end; /* its initial instructions */
	uint8_t fde_enc;          /* encoding of the FDEs' addresses */
	uint8_t has_aug;          /* 'z': FDEs carry augmentation data */
	uint8_t signal;           /* 'S': signal frames */
};

static int parse_cie(const uint8_t *at, uintptr_t lo, uintptr_t hi, struct cie *c)
{
	uint32_t len;
	if ((uintptr_t)at < lo || (uintptr_t)at + 8 > hi)
		return -1;
	memcpy(&len, at, 4);
	if (len == 0 || len == 0xffffffffu || (uintptr_t)at + 4 + len > hi)
		return -1;
	struct rd r = {at + 4, at + 4 + len, 0};
	if (rd_fixed(&r, 4) != 0) /* CIE id */
		return -1;
	uint8_t version = (uint8_t)rd_fixed(&r, 1);
	if (version != 1 && version != 3)
		return -1;
	const char *aug = (const char *)r.p;
	size_t alen = strnlen(aug, (size_t)(r.end - r.p));
	if (alen >= 8 || r.p + alen >= r.end)
		return -1;
	r.p += alen + 1;
	memset(c, 0, sizeof(*c));
	c->caf = rd_uleb(&r);
	c->daf = rd_sleb(&r);
	c->ra_reg = version == 1 ? rd_fixed(&r, 1) : rd_uleb(&r);
	c->fde_enc = 0;
	if (aug[0] == 'z') {
		c->has_aug = 1;
		uint64_t dlen = rd_uleb(&r);
		if (r.bad || dlen > (uint64_t)(r.end - r.p))
			return -1;
		struct rd a = {r.p, r.p + dlen, 0};
		for (const char *k = aug + 1; *k; k++) {
			if (*k == 'R')
				c->fde_enc = (uint8_t)rd_fixed(&a, 1);
			else if (*k == 'L')
				rd_fixed(&a, 1);
			else if (*k == 'P') {
				uint8_t penc = (uint8_t)rd_fixed(&a, 1);
				rd_encoded(&a, penc & 0x7f); /* the personality, not followed */
			} else if (*k == 'S')
				c->signal = 1;
			else
				return -1;
		}
		if (a.bad)
			return -1;
		r.p += dlen;
	} else if (aug[0]) {
		return -1;
	}
	if (r.bad)
		return -1;
	c->ins = r.p;
	c->end = r.end;
	return 0;
}

#define STATE_DEPTH 8 /* DW_CFA_remember_state nesting kept */

/* Runs the instructions in [p, end) on *cur while the location stays at or
 * below target (loc: where they start).  -1 on what cannot be read. */
static int run_cfa(const struct cie *c, const uint8_t *p, const uint8_t *end, uint64_t loc,
		   uint64_t target, struct row *cur, const struct row *init)
{
	struct row saved[STATE_DEPTH];
	unsigned nsaved = 0;
	struct rd r = {p, end, 0};
	while (r.p < r.end && !r.bad) {
		uint8_t op = *r.p++;
		uint64_t reg = op & 0x3f, adv = 0;
		int64_t off;
		switch (op >> 6) {
		case 1: /* advance_loc */
			adv = reg;
			goto advance;
		case 2: /* offset */
			off = (int64_t)rd_uleb(&r) * c->daf;
			goto at_cfa;
		case 3: /* restore */
			goto restore;
		}
		switch (op) {
		case 0x00: /* nop */
			break;
		case 0x01: /* set_loc */
			loc = rd_encoded(&r, c->fde_enc);
			if (loc > target)
				return 0;
			break;
		case 0x02: adv = rd_fixed(&r, 1); goto advance;
		case 0x03: adv = rd_fixed(&r, 2); goto advance;
		case 0x04: adv = rd_fixed(&r, 4); goto advance;
		case 0x05: /* offset_extended */
			reg = rd_uleb(&r);
			off = (int64_t)rd_uleb(&r) * c->daf;
			goto at_cfa;
		case 0x11: /* offset_extended_sf */
			reg = rd_uleb(&r);
			off = rd_sleb(&r) * c->daf;
			goto at_cfa;
		case 0x2f: /* GNU_negative_offset_extended */
			reg = rd_uleb(&r);
			off = -(int64_t)rd_uleb(&r) * c->daf;
			goto at_cfa;
		case 0x06: /* restore_extended */
			reg = rd_uleb(&r);
			goto restore;
		case 0x07: /* undefined */
		case 0x08: /* same_value */
			reg = rd_uleb(&r);
			if (reg == REG_RBP)
				cur->rbp_how = op == 0x07 ? AT_OTHER : AT_SAME;
			else if (reg == REG_RSP)
				cur->rsp_how = op == 0x07 ? AT_OTHER : AT_SAME;
			else if (reg == c->ra_reg)
				cur->ra_how = op == 0x07 ? AT_UNDEF : AT_OTHER;
			break;
		case 0x09: /* register */
		case 0x14: /* val_offset */
		case 0x15: /* val_offset_sf */
			reg = rd_uleb(&r);
			if (op == 0x15)
				rd_sleb(&r);
			else
				rd_uleb(&r);
			goto other;
		case 0x10: /* expression */
		case 0x16: /* val_expression */
			reg = rd_uleb(&r);
			off = (int64_t)rd_uleb(&r);
			if (r.bad || off < 0 || off > r.end - r.p)
				return -1;
			r.p += off;
			goto other;
		case 0x0a: /* remember_state */
			if (nsaved == STATE_DEPTH)
				return -1;
			saved[nsaved++] = *cur;
			break;
		case 0x0b: /* restore_state */
			if (!nsaved)
				return -1;
			*cur = saved[--nsaved];
			break;
		case 0x0c: /* def_cfa */
			cur->cfa_how = CFA_REG;
			cur->cfa_reg = rd_uleb(&r);
			cur->cfa_off = (int64_t)rd_uleb(&r);
			break;
		case 0x12: /* def_cfa_sf */
			cur->cfa_how = CFA_REG;
			cur->cfa_reg = rd_uleb(&r);
			cur->cfa_off = rd_sleb(&r) * c->daf;
			break;
		case 0x0d: /* def_cfa_register */
			cur->cfa_reg = rd_uleb(&r);
			if (cur->cfa_how == CFA_RBP_DEREF)
				cur->cfa_how = CFA_OTHER;
			break;
		case 0x0e: /* def_cfa_offset */
			cur->cfa_off = (int64_t)rd_uleb(&r);
			if (cur->cfa_how == CFA_RBP_DEREF)
				cur->cfa_how = CFA_OTHER;
			break;
		case 0x13: /* def_cfa_offset_sf */
			cur->cfa_off = rd_sleb(&r) * c->daf;
			if (cur->cfa_how == CFA_RBP_DEREF)
				cur->cfa_how = CFA_OTHER;
			break;
		case 0x0f: { /* def_cfa_expression */
			uint64_t n = rd_uleb(&r);
			if (r.bad || n > (uint64_t)(r.end - r.p))
				return -1;
			/* DW_OP_breg6 (rbp) OFF; DW_OP_deref: what gcc writes for
			 * a function that realigns its stack, past the prologue */
			struct rd e = {r.p, r.p + n, 0};
			cur->cfa_how = CFA_OTHER;
			if (n >= 3 && *e.p++ == 0x76) {
				int64_t o = rd_sleb(&e);
				if (!e.bad && e.p + 1 == e.end && *e.p == 0x06) {
					cur->cfa_how = CFA_RBP_DEREF;
					cur->cfa_off = o;
				}
			}
			r.p += n;
			break;
		}
		case 0x2e: /* GNU_args_size */
			rd_uleb(&r);
			break;
		default:
			return -1;
		}
		continue;
	advance:
		loc += adv * c->caf;
		if (loc > target)
			return 0;
		continue;
	at_cfa:
		if (reg == REG_RBP) {
			cur->rbp_how = AT_CFA;
			cur->rbp_off = off;
		} else if (reg == REG_RSP) {
			cur->rsp_how = AT_OTHER;
		} else if (reg == c->ra_reg) {
			cur->ra_how = AT_CFA;
			cur->ra_off = off;
		}
		continue;
	restore:
		if (!init)
			return -1; /* in the CIE itself */
		if (reg == REG_RBP) {
			cur->rbp_how = init->rbp_how;
			cur->rbp_off = init->rbp_off;
		} else if (reg == REG_RSP) {
			cur->rsp_how = init->rsp_how;
		} else if (reg == c->ra_reg) {
			cur->ra_how = init->ra_how;
			cur->ra_off = init->ra_off;
		}
		continue;
	other:
		if (reg == REG_RBP)
			cur->rbp_how = AT_OTHER;
		else if (reg == REG_RSP)
			cur->rsp_how = AT_OTHER;
		else if (reg == c->ra_reg)
			cur->ra_how = AT_OTHER;
		continue;
	}
	return r.bad ? -1 : 0;
}

/* The compact form of a row, HT_CFI_NONE when it has none. */
static struct ht_cfi compact(const struct row *w)
{
	struct ht_cfi none = {0, 0, HT_CFI_NONE, 0};
	if (w->ra_how == AT_UNDEF) {
		struct ht_cfi end = {0, 0, HT_CFI_END, 0};
		return end;
	}
	if (w->ra_how != AT_CFA || w->ra_off != -8 || w->rsp_how != AT_SAME)
		return none;
	struct ht_cfi c = {0, 0, HT_CFI_NONE, 0};
	if (w->cfa_how == CFA_REG && w->cfa_reg == REG_RSP)
		c.kind = HT_CFI_RSP;
	else if (w->cfa_how == CFA_REG && w->cfa_reg == REG_RBP)
		c.kind = HT_CFI_RBP;
	else if (w->cfa_how == CFA_RBP_DEREF)
		c.kind = HT_CFI_RBP_DEREF;
	else
		return none;
	if (w->cfa_off < INT32_MIN || w->cfa_off > INT32_MAX)
		return none;
	c.cfa_off = (int32_t)w->cfa_off;
	if (w->rbp_how == AT_CFA) {
		if (w->rbp_off == 0 || w->rbp_off < INT16_MIN || w->rbp_off > INT16_MAX)
			return none;
		c.rbp_off = (int16_t)w->rbp_off;
	} else if (w->rbp_how != AT_SAME) {
		return none;
	}
	return c;
}

struct ht_cfi ht_cfi__find(const uint8_t *hdr, uint32_t nfde, uintptr_t lo, uintptr_t hi,
			   uint64_t pc)
{
	struct ht_cfi none = {0, 0, HT_CFI_NONE, 0};
	if (!hdr || !nfde || pc == 0)
		return none;
	/* the search table: version 1, pointer encodings, then (after the
	 * .eh_frame pointer and the count) pairs of 4-byte offsets from hdr */
	if (hdr[0] != 1 || hdr[3] != 0x3b || (hdr[2] & 0x0f) != 0x03)
		return none;
	unsigned psize;
	switch (hdr[1] & 0x0f) {
	case 0x02: case 0x0a: psize = 2; break;
	case 0x03: case 0x0b: psize = 4; break;
	case 0x00: case 0x04: case 0x0c: psize = 8; break;
	default: return none;
	}
	const uint8_t *table = hdr + 8 + psize;
	if ((uintptr_t)table + 8 * (uint64_t)nfde > hi)
		return none;
	uint64_t target = pc - 1; /* the call, not the instruction after it */
	int64_t want = (int64_t)(target - (uint64_t)(uintptr_t)hdr);
	uint32_t a = 0, b = nfde;
	struct ht_cfi nofde = {0, 0, HT_CFI_NOFDE, 0};
	int32_t first;
	memcpy(&first, table, 4);
	if ((int64_t)first > want)
		return nofde;
	while (b - a > 1) {
		uint32_t mid = a + (b - a) / 2;
		int32_t loc;
		memcpy(&loc, table + 8 * (uint64_t)mid, 4);
		if ((int64_t)loc <= want)
			a = mid;
		else
			b = mid;
	}
	int32_t off;
	memcpy(&off, table + 8 * (uint64_t)a + 4, 4);
	const uint8_t *fde = hdr + off;
	uint32_t len, cie_ptr;
	if ((uintptr_t)fde < lo || (uintptr_t)fde + 8 > hi)
		return none;
	memcpy(&len, fde, 4);
	if (len == 0 || len == 0xffffffffu || (uintptr_t)fde + 4 + len > hi)
		return none;
	memcpy(&cie_ptr, fde + 4, 4);
	if (cie_ptr == 0 || cie_ptr > (uintptr_t)fde + 4 - lo)
		return none;
	struct cie c;
	if (parse_cie(fde + 4 - cie_ptr, lo, hi, &c) < 0 || c.signal)
		return none;
	struct rd r = {fde + 8, fde + 4 + len, 0};
	uint64_t start = rd_encoded(&r, c.fde_enc);
	uint64_t range = rd_encoded(&r, c.fde_enc & 0x0f);
	if (c.has_aug) {
		uint64_t n = rd_uleb(&r);
		if (r.bad || n > (uint64_t)(r.end - r.p))
			return none;
		r.p += n;
	}
	if (r.bad)
		return none;
	if (target < start || target - start >= range)
		return nofde;
	struct row w = {0, 0, 0, 0, CFA_OTHER, AT_SAME, AT_OTHER, AT_SAME};
	if (run_cfa(&c, c.ins, c.end, start, UINT64_MAX, &w, NULL) < 0)
		return none;
	struct row init = w;
	if (run_cfa(&c, r.p, r.end, start, target, &w, &init) < 0)
		return none;
	return compact(&w);
}
