/* request.c and reply_peek.c: one message in, what the proxy must do out. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <cmocka.h>

#include "fixtures/wire_builder.h"
#include "fixtures/wire_captures.h"
#include "protocol/compress.h"
#include "protocol/reply_peek.h"
#include "protocol/request.h"
#include "protocol/request_template.h"

/* An OP_MSG with body `json` and flag bits `flags`. */
static void opmsg_json(wb *b, int32_t request_id, uint32_t flags, const char *json)
{
	bson_error_t berr;
	bson_t *doc = bson_new_from_json((const uint8_t *)json, -1, &berr);
	assert_non_null(doc);
	wb_header(b, request_id, 0, OP_MSG);
	wb_i32(b, (int32_t)flags);
	wb_u8(b, 0);
	wb_doc(b, doc);
	wb_finish(b);
	bson_destroy(doc);
}

static void test_opmsg_command(void **state)
{
	request r;
	wire_error err = {0};
	assert_int_equal(
	    request_decode(&r, fx_pymongo_find_opmsg, sizeof(fx_pymongo_find_opmsg), &err),
	    REQUEST_COMMAND);
	assert_int_equal(r.opcode, OP_MSG);
	assert_int_equal(r.form, REPLY_FORM_OPMSG);
	assert_false(r.more_to_come);
	assert_false(r.hello);
	assert_string_equal(r.view.name, "find");
	assert_int_equal(r.cmd, CMD_FIND);
	assert_ptr_equal(r.plain, fx_pymongo_find_opmsg);
	assert_int_equal(r.h.request_id, wire_read_i32(fx_pymongo_find_opmsg + 4));
	request_release(&r);
}

static void test_flags_and_awaitable_hello(void **state)
{
	wb b;
	request r;
	wire_error err = {0};
	opmsg_json(&b, 7, OPMSG_MORE_TO_COME, "{\"insert\": \"c\", \"$db\": \"d\"}");
	assert_int_equal(request_decode(&r, b.buf, b.n, &err), REQUEST_COMMAND);
	assert_true(r.more_to_come);
	assert_false(r.exhaust_allowed);
	assert_int_equal(r.cmd, CMD_INSERT);

	opmsg_json(&b, 8, OPMSG_EXHAUST_ALLOWED,
	           "{\"hello\": 1, \"topologyVersion\": {\"counter\": 0}, "
	           "\"maxAwaitTimeMS\": 10000, \"$db\": \"admin\"}");
	assert_int_equal(request_decode(&r, b.buf, b.n, &err), REQUEST_COMMAND);
	assert_true(r.exhaust_allowed);
	assert_true(r.hello);
	assert_true(r.awaitable_hello);

	opmsg_json(&b, 9, 0, "{\"isMaster\": 1, \"$db\": \"admin\"}");
	assert_int_equal(request_decode(&r, b.buf, b.n, &err), REQUEST_COMMAND);
	assert_true(r.hello);
	assert_int_equal(r.cmd, CMD_HELLO); /* an alias: the command it spells */
	assert_false(r.awaitable_hello);

	/* the table is case-sensitive, as the server's lookup is */
	opmsg_json(&b, 10, 0, "{\"Find\": \"c\", \"$db\": \"d\"}");
	assert_int_equal(request_decode(&r, b.buf, b.n, &err), REQUEST_COMMAND);
	assert_int_equal(r.cmd, CMD_NONE);
	assert_false(r.hello);
}

/* A bad OP_MSG is rejected with its reason, and moreToCome is still known
 * so the caller can tell a reply is not allowed. */
static void test_bad_opmsg_rejected(void **state)
{
	wb b;
	request r;
	wire_error err = {0};
	opmsg_json(&b, 7, OPMSG_MORE_TO_COME | (1u << 5), "{\"ping\": 1, \"$db\": \"d\"}");
	assert_int_equal(request_decode(&r, b.buf, b.n, &err), REQUEST_REJECT);
	assert_true(r.more_to_come);
	assert_int_equal(err.code, WIRE_ERR_PROTOCOL);

	opmsg_json(&b, 7, 0, "{\"ping\": 1}"); /* no $db */
	assert_int_equal(request_decode(&r, b.buf, b.n, &err), REQUEST_REJECT);
	assert_false(r.more_to_come);
	assert_int_equal(r.form, REPLY_FORM_OPMSG);
}

static void test_opquery_handshake_and_refusals(void **state)
{
	request r;
	wire_error err = {0};
	assert_int_equal(request_decode(&r, fx_pymongo_ismaster_opquery,
	                                sizeof(fx_pymongo_ismaster_opquery), &err),
	                 REQUEST_COMMAND);
	assert_int_equal(r.form, REPLY_FORM_OPREPLY);
	assert_true(r.hello);

	/* find over OP_QUERY: refused as a 5.1+ server refuses it */
	bson_t *q = BCON_NEW("find", "c");
	wb b;
	wb_opquery(&b, 3, 0, "d.$cmd", q);
	bson_destroy(q);
	assert_int_equal(request_decode(&r, b.buf, b.n, &err), REQUEST_REJECT);
	assert_wire_error(err, WIRE_ERR_UNSUPPORTED_OPQUERY, "Unsupported OP_QUERY command: find");
	assert_int_equal(r.form, REPLY_FORM_OPREPLY);
}

static void test_compressed_decodes_inner(void **state)
{
	request r;
	wire_error err = {0};
	assert_int_equal(request_decode(&r, fx_compressed_zlib, sizeof(fx_compressed_zlib), &err),
	                 REQUEST_COMMAND);
	assert_int_equal(r.h.opcode, OP_COMPRESSED);
	assert_int_equal(r.opcode, OP_MSG);
	assert_string_equal(r.view.name, "find");
	assert_ptr_not_equal(r.plain, fx_compressed_zlib);
	assert_int_equal(r.plain_len, sizeof(fx_pymongo_find_opmsg));
	/* bytes mongoguard did not decode itself are never rewritten */
	size_t n = 0;
	assert_null(request_strip_compression(&r, &n));
	request_release(&r);
	assert_null(r.inflated);
}

/* A command naming a top-level field twice is refused before analysis:
 * servers differ on which occurrence they read (FerretDB the last, mongod
 * refuses), so judging either one could let a blocked request through. */
static void test_duplicate_top_level_field_refused(void **state)
{
	static const char *const dups[][2] = {
	    {"{\"find\": \"c\", \"filter\": {\"a\": 1}, \"filter\": {}, \"$db\": \"d\"}",
	     "find.filter"},
	    {"{\"find\": \"c\", \"$db\": \"d\", \"$db\": \"e\"}", "find.$db"},
	    {"{\"find\": \"c\", \"find\": \"other\", \"$db\": \"d\"}", "find.find"},
	    {"{\"update\": \"c\", \"updates\": [], \"ordered\": true, \"updates\": [], \"$db\": "
	     "\"d\"}",
	     "update.updates"},
	};
	for (size_t i = 0; i < sizeof(dups) / sizeof(dups[0]); i++) {
		wb b;
		request r;
		wire_error err = {0};
		opmsg_json(&b, 11, 0, dups[i][0]);
		assert_int_equal(request_decode(&r, b.buf, b.n, &err), REQUEST_REJECT);
		assert_int_equal(err.code, 40413);
		assert_non_null(strstr(err.msg, dups[i][1]));
		assert_non_null(strstr(err.msg, "duplicate field"));
		request_release(&r);
	}
	/* The handshake over OP_QUERY too, bare or wrapped in $query: the
	 * view's kept keys are the command's, not the wrapper's. */
	for (int wrapped = 0; wrapped < 2; wrapped++) {
		bson_t *cmd =
		    BCON_NEW("isMaster", BCON_INT32(1), "client", "{", "}", "client", "{", "}");
		bson_t *q = wrapped ? BCON_NEW("$query", BCON_DOCUMENT(cmd)) : bson_copy(cmd);
		wb b;
		request r;
		wire_error err = {0};
		wb_opquery(&b, 14, 0, "admin.$cmd", q);
		assert_int_equal(request_decode(&r, b.buf, b.n, &err), REQUEST_REJECT);
		assert_int_equal(err.code, 40413);
		assert_non_null(strstr(err.msg, "isMaster.client"));
		request_release(&r);
		bson_destroy(q);
		bson_destroy(cmd);
	}
	/* The same key at different depths is no repetition. */
	wb b;
	request r;
	wire_error err = {0};
	opmsg_json(
	    &b, 12, 0,
	    "{\"find\": \"c\", \"filter\": {\"filter\": 1, \"a\": {\"a\": 1}}, \"$db\": \"d\"}");
	assert_int_equal(request_decode(&r, b.buf, b.n, &err), REQUEST_COMMAND);
	request_release(&r);

	/* A body with more keys than the inline table: sorted, still found. */
	bson_t *big = bson_new();
	BSON_APPEND_UTF8(big, "find", "c");
	char key[16];
	for (int k = 0; k < 200; k++) {
		snprintf(key, sizeof(key), "k%d", k);
		BSON_APPEND_INT32(big, key, k);
	}
	BSON_APPEND_UTF8(big, "$db", "d");
	for (int round = 0; round < 2; round++) {
		if (round == 1)
			BSON_APPEND_INT32(big, "k137", 0);
		wb_header(&b, 13, 0, OP_MSG);
		wb_i32(&b, 0);
		wb_u8(&b, 0);
		wb_doc(&b, big);
		wb_finish(&b);
		request_status want = round == 0 ? REQUEST_COMMAND : REQUEST_REJECT;
		assert_int_equal(request_decode(&r, b.buf, b.n, &err), want);
		if (round == 1)
			assert_non_null(strstr(err.msg, "find.k137"));
		request_release(&r);
	}
	bson_destroy(big);
}

static void test_legacy_and_unknown_opcodes(void **state)
{
	wb b;
	request r;
	wire_error err = {0};
	wb_header(&b, 4, 0, OP_GET_MORE);
	wb_i32(&b, 0);
	wb_finish(&b);
	assert_int_equal(request_decode(&r, b.buf, b.n, &err), REQUEST_REJECT);
	assert_true(r.legacy_opcode);
	assert_int_equal(r.form, REPLY_FORM_OPREPLY);
	assert_wire_error(err, REQUEST_ERR_LEGACY_OPCODE, "OP_GET_MORE is no longer supported");

	wb_header(&b, 5, 0, OP_INSERT);
	wb_i32(&b, 0);
	wb_finish(&b);
	assert_int_equal(request_decode(&r, b.buf, b.n, &err), REQUEST_CLOSE);
	assert_wire_error(err, REQUEST_ERR_LEGACY_OPCODE, "legacy opcode OP_INSERT");

	wb_header(&b, 6, 0, 4242);
	wb_finish(&b);
	assert_int_equal(request_decode(&r, b.buf, b.n, &err), REQUEST_CLOSE);
	assert_wire_error(err, WIRE_ERR_PROTOCOL, "unknown opcode 4242");
}

static void test_length_must_match_header(void **state)
{
	request r;
	wire_error err = {0};
	assert_int_equal(
	    request_decode(&r, fx_pymongo_find_opmsg, sizeof(fx_pymongo_find_opmsg) - 1, &err),
	    REQUEST_CLOSE);
	assert_wire_error(err, WIRE_ERR_PROTOCOL, "were framed");
	assert_int_equal(request_decode(&r, fx_pymongo_find_opmsg, 10, &err), REQUEST_CLOSE);
	assert_wire_error(err, WIRE_ERR_PROTOCOL, "shorter than its 16-byte header");
}

static void test_strip_compression_from_hello(void **state)
{
	wb b;
	request r;
	wire_error err = {0};
	opmsg_json(&b, 11, 0, "{\"hello\": 1, \"compression\": [\"zstd\"], \"$db\": \"admin\"}");
	assert_int_equal(request_decode(&r, b.buf, b.n, &err), REQUEST_COMMAND);
	size_t n = 0;
	uint8_t *out = request_strip_compression(&r, &n);
	assert_non_null(out);
	request r2;
	assert_int_equal(request_decode(&r2, out, n, &err), REQUEST_COMMAND);
	assert_true(r2.hello);
	assert_false(bson_has_field(&r2.view.body, "compression"));
	free(out);
}

/* ---- reply peek ---- */

static void test_peek_opmsg_needs_flags(void **state)
{
	reply_peek p;
	size_t need = 0;
	wire_error err = {0};
	const uint8_t *m = fx_ferretdb_find_reply_opmsg;
	assert_int_equal(reply_peek_parse(m, 10, &p, &need, &err), FRAME_NEED_MORE);
	assert_int_equal(need, WIRE_HEADER_LEN);
	assert_int_equal(reply_peek_parse(m, 16, &p, &need, &err), FRAME_NEED_MORE);
	assert_int_equal(need, REPLY_PEEK_LEN);
	assert_int_equal(reply_peek_parse(m, 20, &p, &need, &err), FRAME_OK);
	assert_false(p.more_to_come);
	assert_int_equal(p.h.length, sizeof(fx_ferretdb_find_reply_opmsg));

	wb b;
	opmsg_json(&b, 1, OPMSG_MORE_TO_COME, "{\"ok\": 1}");
	assert_int_equal(reply_peek_parse(b.buf, 20, &p, &need, &err), FRAME_OK);
	assert_true(p.more_to_come);
}

static void test_peek_opreply_header_only(void **state)
{
	reply_peek p;
	size_t need = 0;
	wire_error err = {0};
	assert_int_equal(reply_peek_parse(fx_ferretdb_ismaster_opreply, 16, &p, &need, &err),
	                 FRAME_OK);
	assert_int_equal(p.h.opcode, OP_REPLY);
}

static void test_peek_invalid(void **state)
{
	reply_peek p;
	size_t need = 0;
	wire_error err = {0};
	wb b;
	wb_header(&b, 1, 0, OP_QUERY);
	wb_i32(&b, 0);
	wb_finish(&b);
	assert_int_equal(reply_peek_parse(b.buf, b.n, &p, &need, &err), FRAME_INVALID);
	assert_wire_error(err, WIRE_ERR_PROTOCOL, "is not a reply");

	wb_header(&b, 1, 0, OP_MSG);
	wb_u8(&b, 0);
	wb_finish(&b); /* 17 bytes: no room for flag bits */
	assert_int_equal(reply_peek_parse(b.buf, b.n, &p, &need, &err), FRAME_INVALID);
	assert_wire_error(err, WIRE_ERR_PROTOCOL, "too short for its flag bits");

	wire_write_i32(b.buf, 48000001);
	assert_int_equal(reply_peek_parse(b.buf, 4, &p, &need, &err), FRAME_INVALID);
}

static void test_peek_compressed_needs_whole(void **state)
{
	reply_peek p;
	size_t need = 0;
	wire_error err = {0};
	const uint8_t *m = fx_compressed_snappy;
	size_t len = sizeof(fx_compressed_snappy);
	assert_int_equal(reply_peek_parse(m, 20, &p, &need, &err), FRAME_NEED_MORE);
	assert_int_equal(need, len);
	assert_int_equal(reply_peek_parse(m, len, &p, &need, &err), FRAME_OK);
	assert_true(p.compressed);
	assert_false(p.more_to_come);

	uint8_t bad[sizeof(fx_compressed_snappy)];
	memcpy(bad, m, len);
	bad[24] = 9; /* unknown compressor */
	assert_int_equal(reply_peek_parse(bad, len, &p, &need, &err), FRAME_INVALID);
	assert_wire_error(err, WIRE_ERR_PROTOCOL, "unreadable OP_COMPRESSED reply");
}

/* ---- request_template.h ---- */

/* Every field request_decode sets, the same in a and b (pointers into the
 * same message). */
static void same_request(const request *a, const request *b, const char *what)
{
	bool same =
	    a->h.length == b->h.length && a->h.request_id == b->h.request_id &&
	    a->h.response_to == b->h.response_to && a->h.opcode == b->h.opcode &&
	    a->msg == b->msg && a->len == b->len && a->opcode == b->opcode && a->form == b->form &&
	    a->more_to_come == b->more_to_come && a->exhaust_allowed == b->exhaust_allowed &&
	    a->legacy_opcode == b->legacy_opcode && a->hello == b->hello &&
	    a->awaitable_hello == b->awaitable_hello && a->cmd == b->cmd && a->plain == b->plain &&
	    a->plain_len == b->plain_len && a->inflated == NULL && b->inflated == NULL &&
	    a->m.flags == b->m.flags && a->m.body == b->m.body && a->m.body_len == b->m.body_len &&
	    a->m.nseqs == b->m.nseqs && a->view.origin == b->view.origin &&
	    a->view.db == b->view.db && a->view.name == b->view.name &&
	    bson_get_data(&a->view.body) == bson_get_data(&b->view.body) &&
	    a->view.body.len == b->view.body.len && a->view.seqs == a->m.seqs &&
	    b->view.seqs == b->m.seqs && a->view.nseqs == b->view.nseqs &&
	    a->view.flags == b->view.flags && a->view.ntop == b->view.ntop;
	for (size_t i = 0; same && i < a->view.ntop && i < CMDVIEW_TOP_KEYS; i++)
		same = a->view.top_keys[i] == b->view.top_keys[i] &&
		       a->view.top_lens[i] == b->view.top_lens[i];
	if (!same)
		fail_msg("%s: the template's request differs from the decoded one", what);
}

/* A message changed in one byte at every offset after its header, in
 * turn, to three values: the template decodes it exactly when the byte
 * lies in one of the body's fixed-size values, and then to what
 * request_decode gives, field by field; any other change is decoded. */
static void test_template_same_as_decoding(void **state)
{
	static const char *const bodies[] = {
	    "{\"find\": \"items\", \"filter\": {\"_id\": 7}, \"limit\": 1, \"singleBatch\": true, "
	    "\"lsid\": {\"id\": {\"$binary\": {\"base64\": \"AAAAAAAAAAAAAAAAAAAAAA==\", "
	    "\"subType\": \"04\"}}}, \"$db\": \"shop\"}",
	    "{\"update\": \"items\", \"updates\": [{\"q\": {\"_id\": {\"$oid\": "
	    "\"65a1b2c3d4e5f60718293a4b\"}}, \"u\": {\"$set\": {\"v\": 2.5, \"at\": {\"$date\": "
	    "\"2026-01-02T03:04:05Z\"}}}}], \"ordered\": true, \"$db\": \"shop\"}",
	    "{\"insert\": \"items\", \"documents\": [{\"_id\": {\"$numberLong\": \"9\"}, \"d\": "
	    "{\"$numberDecimal\": \"1.5\"}, \"t\": {\"$timestamp\": {\"t\": 1, \"i\": 2}}, \"s\": "
	    "\"x\", \"b\": false}], \"$db\": \"shop\"}",
	};
	for (int moreToCome = 0; moreToCome < 2; moreToCome++)
		for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
			wb b;
			opmsg_json(&b, 11, moreToCome ? OPMSG_MORE_TO_COME : 0, bodies[i]);
			request r, t;
			wire_error err = {0};
			assert_int_equal(request_decode(&r, b.buf, b.n, &err), REQUEST_COMMAND);
			request_template *tp = NULL;
			request_template_keep(&tp, &r);
			request_release(&r);
			assert_non_null(tp);
			assert_true(request_decode_repeat(&t, b.buf, b.n, tp));
			assert_int_equal(request_decode(&r, b.buf, b.n, &err), REQUEST_COMMAND);
			same_request(&t, &r, "the template's own message");
			request_release(&r);
			size_t hits = 0;
			uint8_t *mut = malloc(b.n);
			for (size_t at = WIRE_HEADER_LEN; at < b.n; at++)
				for (int flip = 0; flip < 3; flip++) {
					static const uint8_t to[] = {0x00, 0x02, 0x7f};
					memcpy(mut, b.buf, b.n);
					mut[at] = mut[at] == to[flip] ? 0x01 : to[flip];
					if (!request_decode_repeat(&t, mut, b.n, tp))
						continue;
					hits++;
					char what[64];
					snprintf(what, sizeof what, "body %zu, byte %zu set to %#x",
					         i, at, mut[at]);
					if (request_decode(&r, mut, b.n, &err) != REQUEST_COMMAND)
						fail_msg(
						    "%s: the template decoded what request_decode "
						    "refuses: %s",
						    what, err.msg);
					same_request(&t, &r, what);
					request_release(&r);
				}
			/* each body's fixed-size values, 3 changes a byte: _id and limit;
			 * the ObjectId, the double and the date; the int64, the
			 * decimal128 and the timestamp */
			static const size_t want[] = {3 * (4 + 4), 3 * (12 + 8 + 8),
			                              3 * (8 + 16 + 8)};
			if (hits != want[i])
				fail_msg(
				    "body %zu: %zu changed messages taken by the template, not %zu",
				    i, hits, want[i]);
			assert_int_equal(request_template_hits(tp), 1 + hits);
			free(mut);
			request_template_free(tp);
		}
}

/* No template of a handshake, a kind-1 sequence, a checksum, an OP_QUERY;
 * and one template is replaced only after two messages in a row miss it. */
static void test_template_kept_and_replaced(void **state)
{
	request r;
	wire_error err = {0};
	request_template *tp = NULL;
	wb b;
	opmsg_json(&b, 1, 0, "{\"hello\": 1, \"$db\": \"admin\"}");
	assert_int_equal(request_decode(&r, b.buf, b.n, &err), REQUEST_COMMAND);
	request_template_keep(&tp, &r);
	assert_null(tp);
	request_release(&r);

	wb_header(&b, 2, 0, OP_MSG);
	wb_i32(&b, 0);
	wb_u8(&b, 0);
	bson_t *body = BCON_NEW("insert", "items", "$db", "shop");
	wb_doc(&b, body);
	bson_destroy(body);
	size_t seq = wb_seq_begin(&b, "documents");
	bson_t *doc = BCON_NEW("_id", BCON_INT32(1));
	wb_doc(&b, doc);
	bson_destroy(doc);
	wb_seq_end(&b, seq);
	wb_finish(&b);
	assert_int_equal(request_decode(&r, b.buf, b.n, &err), REQUEST_COMMAND);
	request_template_keep(&tp, &r);
	assert_null(tp);
	request_release(&r);

	assert_int_equal(
	    request_decode(&r, fx_pymongo_find_opmsg, sizeof(fx_pymongo_find_opmsg), &err),
	    REQUEST_COMMAND);
	request_template_keep(&tp, &r); /* a driver's find: the template */
	request_release(&r);
	assert_non_null(tp);

	wb a, c;
	opmsg_json(&a, 3, 0, "{\"find\": \"a\", \"filter\": {\"_id\": 1}, \"$db\": \"shop\"}");
	opmsg_json(&c, 4, 0, "{\"count\": \"a\", \"query\": {\"_id\": 1}, \"$db\": \"shop\"}");
	const uint8_t *seq_of[] = {fx_pymongo_find_opmsg,
	                           a.buf,
	                           fx_pymongo_find_opmsg,
	                           a.buf,
	                           a.buf,
	                           a.buf,
	                           c.buf,
	                           a.buf,
	                           c.buf,
	                           c.buf};
	const size_t len_of[] = {sizeof(fx_pymongo_find_opmsg),
	                         a.n,
	                         sizeof(fx_pymongo_find_opmsg),
	                         a.n,
	                         a.n,
	                         a.n,
	                         c.n,
	                         a.n,
	                         c.n,
	                         c.n};
	/* the driver's find hits; a misses once (kept), the find hits again; a
	 * twice in a row replaces it, then hits; c misses once, a hits, c
	 * twice replaces a, then c hits */
	const bool hit[] = {true, false, true, false, false, true, false, true, false, false};
	for (size_t i = 0; i < sizeof(hit) / sizeof(hit[0]); i++) {
		bool got = request_decode_repeat(&r, seq_of[i], len_of[i], tp);
		if (got != hit[i])
			fail_msg("message %zu: %s the template", i, got ? "matched" : "missed");
		if (!got) {
			assert_int_equal(request_decode(&r, seq_of[i], len_of[i], &err),
			                 REQUEST_COMMAND);
			request_template_keep(&tp, &r);
		}
		request_release(&r);
	}
	assert_true(request_decode_repeat(&r, c.buf, c.n, tp));
	request_release(&r);

	/* a checksum: never a template */
	request_template_free(tp);
	tp = NULL;
	bson_t *find = BCON_NEW("find", "a", "$db", "shop");
	wb_header(&b, 5, 0, OP_MSG);
	wb_i32(&b, (int32_t)OPMSG_CHECKSUM_PRESENT);
	wb_u8(&b, 0);
	wb_doc(&b, find);
	bson_destroy(find);
	wb_finish_checksum(&b);
	assert_int_equal(request_decode(&r, b.buf, b.n, &err), REQUEST_COMMAND);
	request_template_keep(&tp, &r);
	assert_null(tp);
	request_release(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_opmsg_command),
	    cmocka_unit_test(test_flags_and_awaitable_hello),
	    cmocka_unit_test(test_bad_opmsg_rejected),
	    cmocka_unit_test(test_opquery_handshake_and_refusals),
	    cmocka_unit_test(test_compressed_decodes_inner),
	    cmocka_unit_test(test_duplicate_top_level_field_refused),
	    cmocka_unit_test(test_legacy_and_unknown_opcodes),
	    cmocka_unit_test(test_length_must_match_header),
	    cmocka_unit_test(test_strip_compression_from_hello),
	    cmocka_unit_test(test_peek_opmsg_needs_flags),
	    cmocka_unit_test(test_peek_opreply_header_only),
	    cmocka_unit_test(test_peek_invalid),
	    cmocka_unit_test(test_peek_compressed_needs_whole),
	    cmocka_unit_test(test_template_same_as_decoding),
	    cmocka_unit_test(test_template_kept_and_replaced),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
