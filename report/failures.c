/* Failures per shape (model.h): a reply with ok: 0, or an ok one that
 * carries writeErrors, is a failure; its code (the reply's, or the first
 * writeError's) is counted. A shape most of whose replies failed is
 * marked: its latency is how fast the server said no. */
#include "report/aggregate_parts.h"

void agg_note_failure(model_shape *s, int32_t code)
{
	s->errors++;
	for (size_t i = 0; i < s->ncodes; i++)
		if (s->codes[i] == code) {
			s->code_counts[i]++;
			return;
		}
	if (s->ncodes < MODEL_ERROR_CODES) {
		s->codes[s->ncodes] = code;
		s->code_counts[s->ncodes++] = 1;
	} else {
		s->other_codes++;
	}
}

double model_failed_share(const model_shape *s)
{
	return s->nlat ? (double)s->errors / (double)s->nlat : 0;
}

void agg_finish_failures(model_shape *s)
{
	for (size_t i = 1; i < s->ncodes; i++) /* a handful: insertion sort */
		for (size_t j = i; j > 0 && s->code_counts[j] > s->code_counts[j - 1]; j--) {
			int32_t c = s->codes[j];
			uint64_t n = s->code_counts[j];
			s->codes[j] = s->codes[j - 1];
			s->code_counts[j] = s->code_counts[j - 1];
			s->codes[j - 1] = c;
			s->code_counts[j - 1] = n;
		}
	s->mostly_fails = s->errors && model_failed_share(s) > 0.5;
}
