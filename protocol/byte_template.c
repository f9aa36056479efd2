/* Byte templates (byte_template.h): a run of bytes kept as the pattern of
 * later runs that may differ only in given spans, so a statement or a
 * command that matches is not decoded or read again. Short runs compare
 * a word at a time under a mask, long ones by memcmp between the spans. */
#include "protocol/byte_template.h"

/* The spans in the order of their bytes (a statement may hold u before q),
 * and none overlapping. */
static bool spans_sort(byte_spans *sp)
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

/* The words and masks, for a statement short enough. */
static void template_words(byte_template *tp)
{
	uint8_t m[8 * BYTE_TEMPLATE_WORDS];
	tp->words = 0;
	if (tp->len < 8 || tp->len > sizeof m)
		return;
	memset(m, 0xff, tp->len);
	for (uint32_t i = 0; i < tp->spans.n; i++)
		memset(m + tp->spans.s[i].at, 0, tp->spans.s[i].len);
	uint32_t w = tp->len / 8;
	for (uint32_t i = 0; i < w; i++) {
		tp->mask[i] = byte_template_load64(m + 8 * i);
		tp->bytes[i] = byte_template_load64(tp->raw + 8 * i) & tp->mask[i];
	}
	tp->mask[w] = byte_template_load64(m + tp->len - 8);
	tp->bytes[w] = byte_template_load64(tp->raw + tp->len - 8) & tp->mask[w];
	tp->words = w;
}

bool byte_template_set(byte_template *tp, const uint8_t *raw, uint32_t len, const byte_spans *spans)
{
	tp->raw = raw;
	tp->len = len;
	tp->spans = *spans;
	tp->valid = !spans->full && spans_sort(&tp->spans);
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
