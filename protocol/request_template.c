/* request_template.h. The OP_MSG layout a template covers: the 16-byte
 * header, flagBits, one kind byte (0), the body to the end. */
#include "protocol/request_template.h"

#include <stdlib.h>

#include "protocol/frame.h"
#include "protocol/wire_doc.h"

#define BODY_AT REQUEST_TEMPLATE_BODY_AT

struct request_template {
	bool valid;
	uint8_t misses; /* messages in a row that did not match */
	bool more_to_come, exhaust_allowed;
	cmd_id cmd;   /* the name is one of the fixed bytes */
	uint32_t len; /* the message's */
	uint32_t flags;
	uint32_t db_at; /* offsets in the message */
	uint32_t ntop;
	uint32_t key_at[CMDVIEW_TOP_KEYS], key_len[CMDVIEW_TOP_KEYS];
	uint64_t hits;
	uint64_t sets;    /* request_template_sets */
	byte_template bt; /* of the message after its header */
	byte_spans body;  /* bt's spans, as offsets into the body */
};

/* For request_template_matches and request_decode_repeat, inlined in each. */
static inline bool matches(const request_template *t, const uint8_t *msg, size_t len)
{
	return t && t->valid && len == t->len && wire_read_i32(msg + 12) == OP_MSG &&
	       byte_template_matches(&t->bt, msg + WIRE_HEADER_LEN,
	                             (uint32_t)(len - WIRE_HEADER_LEN));
}

bool request_template_matches(const request_template *t, const uint8_t *msg, size_t len)
{
	return matches(t, msg, len);
}

void request_template_hit(request_template *t)
{
	t->misses = 0;
	t->hits++;
}

bool request_decode_repeat(request *r, const uint8_t *msg, size_t len, request_template *t)
{
	if (!t || !t->valid)
		return false;
	if (!matches(t, msg, len)) {
		if (t->misses < UINT8_MAX)
			t->misses++;
		return false;
	}
	request_template_hit(t);
	memset(r, 0, offsetof(request, view));
	r->h.length = (int32_t)len;
	r->h.request_id = wire_read_i32(msg + 4);
	r->h.response_to = wire_read_i32(msg + 8);
	r->h.opcode = OP_MSG;
	r->msg = r->plain = msg;
	r->len = r->plain_len = len;
	r->inflated = NULL;
	r->opcode = OP_MSG;
	r->form = REPLY_FORM_OPMSG;
	r->more_to_come = t->more_to_come;
	r->exhaust_allowed = t->exhaust_allowed;
	r->cmd = t->cmd;
	r->m.flags = t->flags;
	r->m.body = msg + BODY_AT;
	r->m.body_len = len - BODY_AT;
	r->m.nseqs = 0;
	cmdview *v = &r->view;
	v->origin = CMDVIEW_FROM_OPMSG;
	v->db = (const char *)msg + t->db_at;
	v->name = (const char *)msg + BODY_AT + 5;
	v->seqs = r->m.seqs;
	v->nseqs = 0;
	v->flags = t->flags;
	v->ntop = t->ntop;
	for (uint32_t i = 0; i < t->ntop; i++) {
		v->top_keys[i] = (const char *)msg + t->key_at[i];
		v->top_lens[i] = t->key_len[i];
	}
	v->db_buf[0] = '\0';
	return bson_init_static(&v->body, r->m.body, r->m.body_len); /* framed as before */
}

/* Whether r, decoded, can be a template: see the header. */
static bool templatable(const request *r)
{
	return r->opcode == OP_MSG && !r->inflated && !r->hello && r->m.nseqs == 0 &&
	       !(r->m.flags & OPMSG_CHECKSUM_PRESENT) && r->len > WIRE_HEADER_LEN &&
	       byte_template_by_words(r->len - WIRE_HEADER_LEN) && r->m.body == r->msg + BODY_AT &&
	       r->m.body_len == r->len - BODY_AT && r->view.ntop <= CMDVIEW_TOP_KEYS &&
	       r->view.origin == CMDVIEW_FROM_OPMSG;
}

void request_template_keep(request_template **slot, const request *r)
{
	request_template *t = *slot;
	if ((t && t->valid && t->misses < 2) || !templatable(r))
		return;
	if (!t && (t = *slot = malloc(sizeof(*t)))) {
		t->hits = 0;
		t->sets = 0;
	}
	if (!t)
		return; /* no template: every message is decoded */
	t->valid = false;
	t->misses = 0;
	byte_spans sp = {.base = r->msg + WIRE_HEADER_LEN, .n = 0, .full = false};
	if (!wire_doc_fixed_spans(r->m.body, r->m.body_len, &sp) ||
	    !byte_template_set_words(&t->bt, r->msg + WIRE_HEADER_LEN,
	                             (uint32_t)(r->len - WIRE_HEADER_LEN), &sp))
		return;
	t->body = t->bt.spans;
	t->body.base = NULL; /* offsets into any body that matched */
	for (uint32_t i = 0; i < t->body.n; i++)
		t->body.s[i].at -= BODY_AT - WIRE_HEADER_LEN; /* values: all in the body */
	t->len = (uint32_t)r->len;
	t->flags = r->m.flags;
	t->more_to_come = r->more_to_come;
	t->exhaust_allowed = r->exhaust_allowed;
	t->cmd = r->cmd;
	t->db_at = (uint32_t)((const uint8_t *)r->view.db - r->msg);
	t->ntop = (uint32_t)r->view.ntop;
	for (uint32_t i = 0; i < t->ntop; i++) {
		t->key_at[i] = (uint32_t)((const uint8_t *)r->view.top_keys[i] - r->msg);
		t->key_len[i] = r->view.top_lens[i];
	}
	t->valid = true;
	t->sets++;
}

void request_template_free(request_template *t)
{
	free(t);
}

uint64_t request_template_hits(const request_template *t)
{
	return t ? t->hits : 0;
}

uint64_t request_template_sets(const request_template *t)
{
	return t ? t->sets : 0;
}

const byte_spans *request_template_body_spans(const request_template *t)
{
	return t && t->valid ? &t->body : NULL;
}
