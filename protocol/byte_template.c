/* Byte templates (byte_template.h): a run of bytes kept as the pattern of
 * later runs that may differ only in given spans, so a statement or a
 * command that matches is not decoded or read again. Short runs compare
 * a word at a time under a mask, long ones by memcmp between the spans. */
#include "protocol/byte_template.h"

/* byte_template.h */
bool byte_spans_sort(byte_spans *sp)
{
	for (uint32_t i = 1; i < sp->n; i++)
		for (uint32_t j = i; j > 0 && sp->s[j].at < sp->s[j - 1].at; j--) {
			uint32_t at = sp->s[j].at, len = sp->s[j].len;
			sp->s[j] = sp->s[j - 1];
			sp->s[j - 1].at = at;
			sp->s[j - 1].len = len;
		}
	for (uint32_t i = 1; i < sp->n; i++)
		if (sp->s[i - 1].at + sp->s[i - 1].len > sp->s[i].at)
			return false;
	return true;
}

/* The words and masks, for a statement short enough. The byte mask is
 * built in tp->mask itself (its words are those bytes, little-endian or
 * not: each is loaded back as the word it is), the tail's word taken from
 * it before it is overwritten: no buffer of its own, and no second pass
 * over the masks. Spans are short (a number, a string's inside): a loop
 * for them, not a call. */
static void template_words(byte_template *tp)
{
	uint8_t *m = (uint8_t *)tp->mask;
	uint32_t len = tp->len;
	tp->words = 0;
	if (len < 8 || len > 8 * BYTE_TEMPLATE_WORDS)
		return;
	memset(m, 0xff, len);
	for (uint32_t i = 0; i < tp->spans.n; i++) {
		uint8_t *z = m + tp->spans.s[i].at;
		uint32_t n = tp->spans.s[i].len;
		if (n > 16)
			memset(z, 0, n);
		else
			for (uint32_t k = 0; k < n; k++)
				z[k] = 0;
	}
	uint32_t w = len / 8;
	uint64_t tail = byte_template_load64(m + len - 8);
	for (uint32_t i = 0; i < w; i++)
		tp->bytes[i] = byte_template_load64(tp->raw + 8 * i) & tp->mask[i];
	tp->mask[w] = tail;
	tp->bytes[w] = byte_template_load64(tp->raw + len - 8) & tail;
	tp->words = w;
}

bool byte_template_set(byte_template *tp, const uint8_t *raw, uint32_t len, const byte_spans *spans)
{
	tp->raw = raw;
	tp->len = len;
	/* the spans given, not the whole array: only the first n are read */
	tp->spans.base = spans->base;
	tp->spans.n = spans->n;
	tp->spans.full = spans->full;
	memcpy(tp->spans.s, spans->s, spans->n * sizeof(spans->s[0]));
	tp->valid = !spans->full && byte_spans_sort(&tp->spans);
	for (uint32_t i = 0; tp->valid && i < tp->spans.n; i++)
		tp->valid = tp->spans.s[i].at + tp->spans.s[i].len <= len;
	if (tp->valid)
		template_words(tp);
	return tp->valid;
}

bool byte_template_set_words(byte_template *tp, const uint8_t *raw, uint32_t len,
                             const byte_spans *spans)
{
	if (!byte_template_by_words(len) || !byte_template_set(tp, raw, len, spans))
		tp->valid = false;
	tp->raw = NULL; /* matched by words only: never read again */
	return tp->valid;
}
