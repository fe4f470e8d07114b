/* A chunk's records as a *stored* zstd frame: raw blocks and zstd's
 * content checksum, no compression.
 *
 * A chunk the writer has no CPU to compress used to go to the file as it
 * was, with nothing to check it by: one flipped bit changed the figures
 * silently.  Wrapped in a zstd frame of raw blocks it costs 16 bytes more
 * for a 64 KiB chunk and one pass of XXH64 (a few microseconds), any zstd
 * decoder reads it (a memcpy and the checksum), and a damaged byte fails
 * the checksum as it does in a compressed chunk (docs/FORMAT.md, "Chunk
 * flags": HT_CHUNK_F_STORED).  Header-only: the recorder and the readers
 * both use it.
 *
 * The frame (RFC 8878): magic, a frame header descriptor with
 * Single_Segment_flag (no window descriptor: the window is the content),
 * Content_Checksum_flag and a 4-byte Frame_Content_Size; then blocks of at
 * most 128 KiB, each a 3-byte header (Last_Block, Block_Type 0 = Raw,
 * Block_Size) and its bytes; then the low 32 bits of XXH64(content, 0).
 * XXH64 is written here from its specification (xxhash.com's
 * doc/xxhash_spec.md), so that the recorder needs nothing of libzstd's
 * internals. */
#ifndef HEAPTRAIL_COMMON_ZSTORED_H
#define HEAPTRAIL_COMMON_ZSTORED_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define HT_ZSTORED_BLOCK (128u << 10) /* zstd's largest block */
#define HT_ZSTORED_HEAD 9u            /* magic, descriptor, content size */

/* Bytes of the stored frame of n bytes. */
static inline size_t ht_zstored_size(size_t n)
{
	size_t blocks = n ? (n + HT_ZSTORED_BLOCK - 1) / HT_ZSTORED_BLOCK : 1;
	return HT_ZSTORED_HEAD + 3 * blocks + n + 4;
}

static inline uint64_t ht_xxh64_rotl(uint64_t x, int r)
{
	return (x << r) | (x >> (64 - r));
}

static inline uint64_t ht_xxh64_read64(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, 8); /* (little endian: the hosts heaptrail runs on) */
	return v;
}

static inline uint64_t ht_xxh64_round(uint64_t acc, uint64_t in)
{
	acc += in * 0xC2B2AE3D27D4EB4Full;
	return ht_xxh64_rotl(acc, 31) * 0x9E3779B185EBCA87ull;
}

static inline uint64_t ht_xxh64_merge(uint64_t h, uint64_t v)
{
	h ^= ht_xxh64_round(0, v);
	return h * 0x9E3779B185EBCA87ull + 0x85EBCA77C2B2AE63ull;
}

/* XXH64 of p[0..n) with seed 0. */
static inline uint64_t ht_xxh64(const void *data, size_t n)
{
	const uint64_t P1 = 0x9E3779B185EBCA87ull, P2 = 0xC2B2AE3D27D4EB4Full,
		       P3 = 0x165667B19E3779F9ull, P4 = 0x85EBCA77C2B2AE63ull,
		       P5 = 0x27D4EB2F165667C5ull;
	const uint8_t *p = data, *end = p + n;
	uint64_t h;
	if (n >= 32) {
		uint64_t v1 = P1 + P2, v2 = P2, v3 = 0, v4 = (uint64_t)0 - P1;
		const uint8_t *limit = end - 32;
		do {
			v1 = ht_xxh64_round(v1, ht_xxh64_read64(p));
			v2 = ht_xxh64_round(v2, ht_xxh64_read64(p + 8));
			v3 = ht_xxh64_round(v3, ht_xxh64_read64(p + 16));
			v4 = ht_xxh64_round(v4, ht_xxh64_read64(p + 24));
			p += 32;
		} while (p <= limit);
		h = ht_xxh64_rotl(v1, 1) + ht_xxh64_rotl(v2, 7) + ht_xxh64_rotl(v3, 12) +
		    ht_xxh64_rotl(v4, 18);
		h = ht_xxh64_merge(h, v1);
		h = ht_xxh64_merge(h, v2);
		h = ht_xxh64_merge(h, v3);
		h = ht_xxh64_merge(h, v4);
	} else {
		h = P5;
	}
	h += (uint64_t)n;
	for (; end - p >= 8; p += 8) {
		h ^= ht_xxh64_round(0, ht_xxh64_read64(p));
		h = ht_xxh64_rotl(h, 27) * P1 + P4;
	}
	if (end - p >= 4) {
		uint32_t k;
		memcpy(&k, p, 4);
		h ^= (uint64_t)k * P1;
		h = ht_xxh64_rotl(h, 23) * P2 + P3;
		p += 4;
	}
	for (; p < end; p++) {
		h ^= *p * P5;
		h = ht_xxh64_rotl(h, 11) * P1;
	}
	h ^= h >> 33;
	h *= P2;
	h ^= h >> 29;
	h *= P3;
	h ^= h >> 32;
	return h;
}

static inline uint8_t *ht_zstored_le(uint8_t *o, uint64_t v, unsigned bytes)
{
	for (unsigned i = 0; i < bytes; i++)
		o[i] = (uint8_t)(v >> (8 * i));
	return o + bytes;
}

/* Writes the stored frame of src[0..n) to dst, which holds
 * ht_zstored_size(n) bytes; returns that size. */
static inline size_t ht_zstored_write(uint8_t *dst, const void *src, size_t n)
{
	const uint8_t *s = src;
	uint8_t *o = ht_zstored_le(dst, 0xFD2FB528u, 4);
	*o++ = 0x80 | 0x20 | 0x04; /* 4-byte content size, single segment, checksum */
	o = ht_zstored_le(o, (uint64_t)n, 4);
	size_t left = n;
	do {
		size_t b = left < HT_ZSTORED_BLOCK ? left : HT_ZSTORED_BLOCK;
		uint32_t last = b == left;
		o = ht_zstored_le(o, last | (uint32_t)b << 3, 3); /* Block_Type 0: Raw */
		memcpy(o, s, b);
		o += b;
		s += b;
		left -= b;
	} while (left);
	o = ht_zstored_le(o, ht_xxh64(src, n) & 0xFFFFFFFFu, 4);
	return (size_t)(o - dst);
}

#endif
