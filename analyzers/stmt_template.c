#include "analyzers/stmt_template.h"

/* The spans in the order of their bytes (a statement may hold u before q),
 * and none overlapping. */
static bool spans_sort(facts_spans *sp)
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
static void template_words(stmt_template *tp)
{
	uint8_t m[8 * TEMPLATE_WORDS];
	tp->words = 0;
	if (tp->len < 8 || tp->len > sizeof m)
		return;
	memset(m, 0xff, tp->len);
	for (uint32_t i = 0; i < tp->spans.n; i++)
		memset(m + tp->spans.s[i].at, 0, tp->spans.s[i].len);
	uint32_t w = tp->len / 8;
	for (uint32_t i = 0; i < w; i++) {
		tp->mask[i] = stmt_template_load64(m + 8 * i);
		tp->bytes[i] = stmt_template_load64(tp->raw + 8 * i) & tp->mask[i];
	}
	tp->mask[w] = stmt_template_load64(m + tp->len - 8);
	tp->bytes[w] = stmt_template_load64(tp->raw + tp->len - 8) & tp->mask[w];
	tp->words = w;
}

bool stmt_template_set(stmt_template *tp, const uint8_t *raw, uint32_t len,
                       const facts_spans *spans)
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
