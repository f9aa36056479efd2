/* The reply framer (see reply_framer.h). */
#include "proxy/session/reply_framer.h"

#include <string.h>

void reply_framer_init(reply_framer *f)
{
	memset(f, 0, sizeof(*f));
	f->want = REPLY_PEEK_LEN;
}

/* The bytes of the current reply that are here, passed or dropped. */
static framer_verb pass(reply_framer *f, size_t avail, framer_step *st)
{
	st->verb = f->drop ? FRAMER_DROP : FRAMER_FORWARD;
	st->n = avail < f->left ? avail : f->left;
	f->left -= st->n;
	if (f->left == 0) {
		st->completes = !f->drop && !f->more;
		f->want = REPLY_PEEK_LEN;
	}
	return st->verb;
}

framer_verb reply_framer_next(reply_framer *f, const uint8_t *p, size_t have, size_t avail,
                              const int32_t *expect, framer_step *st, wire_error *err)
{
	memset(st, 0, sizeof(*st));
	if (f->left > 0) {
		if (avail == 0) {
			st->verb = FRAMER_GATHER;
			st->n = 1;
			return st->verb;
		}
		return pass(f, avail, st);
	}
	size_t need = 0;
	switch (reply_peek_parse(p, have, &st->peek, &need, err)) {
	case FRAME_INVALID:
		st->verb = FRAMER_INVALID;
		return st->verb;
	case FRAME_NEED_MORE:
		f->want = need > REPLY_PEEK_LEN ? need : REPLY_PEEK_LEN;
		st->verb = FRAMER_GATHER;
		st->n = need;
		return st->verb;
	case FRAME_OK:
		break;
	}
	const frame_header *h = &st->peek.h;
	bool drop = !expect || (h->response_to != *expect &&
	                        !(f->streaming && h->response_to == f->stream_from));
	size_t length = (size_t)h->length;
	if (f->whole && !drop && have < length) {
		/* nothing is consumed: the next call peeks again with it all */
		f->want = length;
		st->verb = FRAMER_GATHER;
		st->n = length;
		st->begun = true;
		return st->verb;
	}
	f->left = length;
	f->more = st->peek.more_to_come;
	f->drop = drop;
	if (!f->drop) {
		f->streaming = f->more;
		f->stream_from = h->request_id;
	}
	st->starts = true;
	if (f->whole && !drop) {
		st->verb = FRAMER_WHOLE;
		st->n = length;
		f->left = 0;
		f->want = REPLY_PEEK_LEN;
		st->completes = !f->more;
		return st->verb;
	}
	return pass(f, avail, st);
}
