/* A statement template: a statement of a batch no check was called for,
 * as the pattern for the ones after it. A statement of the same length
 * whose bytes are the same outside the template's spans (facts.h: value
 * bytes nothing in the read of a statement looks at) is read to the same
 * facts, so no check is called for it either, and it is not read at all
 * (engine_parts.c, analyze_statements). ETL batches are statements of one
 * shape with other values.
 *
 * Statements of 8 to 512 bytes are compared a word at a time under a mask
 * (0xff where a byte must match, 0 in a span); longer ones by memcmp of
 * the runs between the spans. The template refers to the statement's
 * bytes: it lives as long as the request. */
#ifndef MG_ANALYZERS_STMT_TEMPLATE_H
#define MG_ANALYZERS_STMT_TEMPLATE_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "analyzers/facts.h"

enum { TEMPLATE_WORDS = 64 }; /* statements up to 512 bytes are matched by words */

typedef struct stmt_template {
	bool valid;
	const uint8_t *raw;
	uint32_t len;
	uint32_t words; /* len / 8 when matched by words, else 0 */
	facts_spans spans;
	/* the template's words, then its last 8 bytes (the tail, overlapping),
	 * each masked; and the masks */
	uint64_t bytes[TEMPLATE_WORDS + 1], mask[TEMPLATE_WORDS + 1];
} stmt_template;

/* Makes tp the template of raw/len with the spans given (in any order):
 * false, and tp not valid, when two spans overlap or one did not fit. */
bool stmt_template_set(stmt_template *tp, const uint8_t *raw, uint32_t len,
                       const facts_spans *spans);

static inline uint64_t stmt_template_load64(const uint8_t *p)
{
	uint64_t w;
	memcpy(&w, p, sizeof w);
	return w;
}

/* Whether raw/len is the template's statement with other span bytes. */
static inline bool stmt_template_matches(const stmt_template *tp, const uint8_t *raw, uint32_t len)
{
	if (!tp->valid || len != tp->len)
		return false;
	if (tp->words) {
		uint64_t diff = 0;
		for (uint32_t i = 0; i < tp->words; i++)
			diff |= (stmt_template_load64(raw + 8 * i) ^ tp->bytes[i]) & tp->mask[i];
		diff |= (stmt_template_load64(raw + len - 8) ^ tp->bytes[tp->words]) &
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
