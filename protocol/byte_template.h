/* A byte template: a run of bytes as the pattern of others of the same
 * length that may differ only in given spans. Two callers keep one:
 *
 *   - the engine, for a batch's statements (a statement no check was
 *     called for is the pattern of the ones after it: their differences
 *     lie in value bytes nothing in the read of a statement looks at,
 *     analyzers/engine/facts.h, so they read to the same facts and are not read;
 *     analysers.c, analyze_statements), and for a connection's last
 *     query judged with no check called (engine.h, engine_repeat);
 *   - the request decoder, for a connection's last decoded command, where
 *     the spans are its fixed-size values (request_template.h).
 *
 * Runs of 8 to 512 bytes are compared a word at a time under a mask (0xff
 * where a byte must match, 0 in a span); longer ones by memcmp of the runs
 * between the spans. A template matched by words keeps its own copy of the
 * bytes; one matched by memcmp refers to the caller's (raw), and lives as
 * long as they do. */
#ifndef MG_PROTOCOL_BYTE_TEMPLATE_H
#define MG_PROTOCOL_BYTE_TEMPLATE_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

/* Spans of a run of bytes: offsets from base, its first byte. */
#define BYTE_SPANS 16

typedef struct byte_spans {
	const uint8_t *base;
	uint32_t n;
	bool full; /* a span did not fit: no template of these bytes */
	struct {
		uint32_t at, len;
	} s[BYTE_SPANS];
} byte_spans;

/* Records len bytes at from as a span of sp (nothing for NULL or 0 bytes;
 * sp->full when there is no room). */
static inline void byte_spans_add(byte_spans *sp, const uint8_t *from, uint32_t len)
{
	if (!sp || len == 0)
		return;
	if (sp->n == BYTE_SPANS) {
		sp->full = true;
		return;
	}
	sp->s[sp->n].at = (uint32_t)(from - sp->base);
	sp->s[sp->n].len = len;
	sp->n++;
}

/* Puts sp's spans in the order of their bytes (a statement may hold u
 * before q): false when two of them overlap. */
bool byte_spans_sort(byte_spans *sp);

enum { BYTE_TEMPLATE_WORDS = 64 }; /* runs up to 512 bytes are matched by words */

typedef struct byte_template {
	bool valid;
	const uint8_t *raw;
	uint32_t len;
	uint32_t words; /* len / 8 when matched by words, else 0 */
	byte_spans spans;
	/* the template's words, then its last 8 bytes (the tail, overlapping),
	 * each masked; and the masks */
	uint64_t bytes[BYTE_TEMPLATE_WORDS + 1], mask[BYTE_TEMPLATE_WORDS + 1];
} byte_template;

/* Makes tp the template of raw/len with the spans given (in any order):
 * false, and tp not valid, when two spans overlap or one did not fit. */
bool byte_template_set(byte_template *tp, const uint8_t *raw, uint32_t len,
                       const byte_spans *spans);

/* Whether a run of len bytes is matched by words (8 to 512 bytes). */
static inline bool byte_template_by_words(size_t len)
{
	return len >= 8 && len <= 8 * BYTE_TEMPLATE_WORDS;
}

/* As byte_template_set, for a template that outlives raw: only a run
 * matched by words makes one (false otherwise), and raw is not kept. */
bool byte_template_set_words(byte_template *tp, const uint8_t *raw, uint32_t len,
                             const byte_spans *spans);

static inline uint64_t byte_template_load64(const uint8_t *p)
{
	uint64_t w;
	memcpy(&w, p, sizeof w);
	return w;
}

/* Two words at once (GCC's and clang's vector extension: one SSE2 or NEON
 * register where there is one, two words elsewhere). */
typedef uint64_t byte_template_pair __attribute__((vector_size(16)));

static inline byte_template_pair byte_template_load128(const void *p)
{
	byte_template_pair w;
	memcpy(&w, p, sizeof w);
	return w;
}

/* Whether raw/len is the template's bytes with other span bytes. The
 * words go two at a time: on every request (the decoder's template, the
 * engine's), where a word at a time spent most of its count on the loop. */
static inline bool byte_template_matches(const byte_template *tp, const uint8_t *raw, uint32_t len)
{
	if (!tp->valid || len != tp->len)
		return false;
	if (tp->words) {
		byte_template_pair acc = {0, 0};
		const uint8_t *b = (const uint8_t *)tp->bytes, *m = (const uint8_t *)tp->mask;
		size_t pairs = 16 * (size_t)(tp->words / 2);
		for (size_t off = 0; off < pairs; off += 16)
			acc |= (byte_template_load128(raw + off) ^ byte_template_load128(b + off)) &
			       byte_template_load128(m + off);
		uint64_t diff = acc[0] | acc[1];
		uint32_t i = tp->words & ~1u;
		if (i < tp->words)
			diff |= (byte_template_load64(raw + 8 * i) ^ tp->bytes[i]) & tp->mask[i];
		diff |= (byte_template_load64(raw + len - 8) ^ tp->bytes[tp->words]) &
		        tp->mask[tp->words];
		return diff == 0;
	}
	uint32_t at = 0;
	for (uint32_t i = 0; i < tp->spans.n; i++) {
		uint32_t s = tp->spans.s[i].at;
		if (memcmp(raw + at, tp->raw + at, s - at) != 0)
			return false;
		at = s + tp->spans.s[i].len;
	}
	return memcmp(raw + at, tp->raw + at, len - at) == 0;
}

#endif
