/* The request framer (see request_framer.h). */
#include "proxy/session/request_framer.h"

/* A large request's next verb: take what the input holds of it, send what
 * may go, judge it once whole, else wait for the rest. */
static reqf_verb large_next(const request_framer *f, size_t avail, reqf_step *st)
{
	if (f->got < f->len && avail > 0) {
		st->verb = REQF_TAKE;
		st->at = f->got;
		st->n = avail < f->len - f->got ? avail : f->len - f->got;
		return st->verb;
	}
	if (f->mode == REQF_RELAYED) {
		size_t upto = f->got < f->len - CUT_HELD ? f->got : f->len - CUT_HELD;
		if (upto > f->sent) {
			st->verb = REQF_SEND;
			st->at = f->sent;
			st->n = upto - f->sent;
			return st->verb;
		}
	}
	if (f->got == f->len) {
		st->verb = REQF_JUDGE;
		st->at = f->sent;
		st->n = f->len - f->sent;
		return st->verb;
	}
	st->verb = REQF_NEED;
	st->n = f->len - f->got;
	st->started = true;
	return st->verb;
}

reqf_verb request_framer_next(const request_framer *f, const uint8_t *hdr, size_t avail,
                              reqf_step *st, wire_error *err)
{
	*st = (reqf_step){0};
	if (f->mode != REQF_BOUNDARY)
		return large_next(f, avail, st);
	if (avail < WIRE_HEADER_LEN) {
		st->verb = REQF_NEED;
		st->n = WIRE_HEADER_LEN;
		st->started = avail > 0;
		return st->verb;
	}
	if (frame_header_parse(hdr, WIRE_HEADER_LEN, &st->head, err) != FRAME_OK) {
		/* what the session's error reply is addressed to, and the length
		 * the log reads another protocol's bytes from */
		st->head.length = wire_read_i32(hdr);
		st->head.request_id = wire_read_i32(hdr + 4);
		st->head.opcode = wire_read_i32(hdr + 12);
		st->verb = REQF_REFUSE;
		return st->verb;
	}
	size_t len = (size_t)st->head.length;
	st->n = len;
	if (avail >= len)
		st->verb = REQF_WHOLE;
	else if (len >= CUT_MIN)
		st->verb = REQF_LARGE;
	else {
		st->verb = REQF_NEED;
		st->started = true;
	}
	return st->verb;
}

size_t request_framer_run(const request_framer *f, const uint8_t *p, size_t have, size_t max,
                          size_t *n)
{
	size_t count = 0, off = 0;
	if (f->mode == REQF_BOUNDARY) {
		while (count < max && have - off >= WIRE_HEADER_LEN) {
			int32_t len = wire_read_i32(p + off);
			if (len < WIRE_MIN_MESSAGE_LEN || len >= CUT_MIN ||
			    (size_t)len > have - off)
				break;
			off += (size_t)len;
			count++;
		}
	}
	*n = off;
	return count;
}

void request_framer_large(request_framer *f, size_t len, bool relay)
{
	*f = (request_framer){relay ? REQF_RELAYED : REQF_HELD, len, 0, 0};
}

void request_framer_took(request_framer *f, size_t n)
{
	f->got += n;
}

void request_framer_sent(request_framer *f, size_t n)
{
	f->sent += n;
}

void request_framer_done(request_framer *f)
{
	request_framer_init(f);
}
