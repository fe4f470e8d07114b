/* A protobuf wire-format writer (export.h): varints, keys (field number
 * << 3 | wire type), length-delimited fields and packed repeated varints;
 * just what profile.proto needs. */
#include "export.h"

#include <stdlib.h>
#include <string.h>

#include "common/util.h"

static void reserve(struct ht_pb *b, size_t more)
{
	if (b->len + more <= b->cap)
		return;
	size_t cap = b->cap ? b->cap : 256;
	while (cap < b->len + more)
		cap *= 2;
	b->buf = ht_xrealloc(b->buf, cap);
	b->cap = cap;
}

static void append(struct ht_pb *b, const void *data, size_t len)
{
	reserve(b, len);
	if (len)
		memcpy(b->buf + b->len, data, len);
	b->len += len;
}

void ht_pb__reset(struct ht_pb *b)
{
	b->len = 0;
}

void ht_pb__free(struct ht_pb *b)
{
	free(b->buf);
	memset(b, 0, sizeof(*b));
}

void ht_pb__varint(struct ht_pb *b, uint64_t v)
{
	reserve(b, 10);
	while (v >= 0x80) {
		b->buf[b->len++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	b->buf[b->len++] = (uint8_t)v;
}

void ht_pb__key(struct ht_pb *b, uint32_t field, int wire_type)
{
	ht_pb__varint(b, (uint64_t)field << 3 | (uint64_t)wire_type);
}

void ht_pb__uint(struct ht_pb *b, uint32_t field, uint64_t v, int always)
{
	if (!v && !always)
		return;
	ht_pb__key(b, field, HT_PB_VARINT);
	ht_pb__varint(b, v);
}

void ht_pb__bytes(struct ht_pb *b, uint32_t field, const void *data, size_t len)
{
	ht_pb__key(b, field, HT_PB_LEN);
	ht_pb__varint(b, len);
	append(b, data, len);
}

void ht_pb__str(struct ht_pb *b, uint32_t field, const char *s)
{
	ht_pb__bytes(b, field, s, strlen(s));
}

void ht_pb__msg(struct ht_pb *b, uint32_t field, const struct ht_pb *sub)
{
	ht_pb__bytes(b, field, sub->buf, sub->len);
}

void ht_pb__append(struct ht_pb *b, const struct ht_pb *fields)
{
	append(b, fields->buf, fields->len);
}

void ht_pb__packed(struct ht_pb *b, uint32_t field, const uint64_t *v, size_t n)
{
	if (!n)
		return;
	size_t len = 0;
	for (size_t i = 0; i < n; i++) {
		uint64_t x = v[i];
		do {
			len++;
			x >>= 7;
		} while (x);
	}
	ht_pb__key(b, field, HT_PB_LEN);
	ht_pb__varint(b, len);
	for (size_t i = 0; i < n; i++)
		ht_pb__varint(b, v[i]);
}
