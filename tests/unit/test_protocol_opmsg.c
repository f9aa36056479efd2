/* opmsg.c and crc32c.c: every OP_MSG shape a driver sends, and every way a
 * message can lie about itself. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>

#include "fixtures/wire_builder.h"
#include "fixtures/wire_captures.h"
#include "protocol/crc32c.h"
#include "protocol/opmsg.h"

/* Appends a kind-0 section holding `d`. */
static void wb_body(wb *b, const bson_t *d)
{
	wb_u8(b, 0);
	wb_doc(b, d);
}

/* {insert: "c", $db: "test"} with the given flags, plus `extra` sections
 * appended by the caller before wb_finish(). */
static void start_msg(wb *b, uint32_t flags)
{
	wb_header(b, 7, 0, OP_MSG);
	wb_i32(b, (int32_t)flags);
}

static bson_t *cmd(void)
{
	return BCON_NEW("insert", "c", "$db", "test");
}

static bool parse(const wb *b, opmsg *m, wire_error *err)
{
	return opmsg_parse(b->buf, b->n, m, err);
}

/* ---- real captures ---- */

static void test_real_insert_body_then_sequence(void **state)
{
	opmsg m;
	wire_error err = {0};
	assert_true(
	    opmsg_parse(fx_pymongo_insert_opmsg, sizeof(fx_pymongo_insert_opmsg), &m, &err));
	assert_int_equal(m.flags, 0);
	assert_int_equal(m.nseqs, 1);
	assert_string_equal(m.seqs[0].id, "documents");
	assert_int_equal(m.seqs[0].count, 2);
	/* body starts right after flags and kind byte */
	assert_ptr_equal(m.body, fx_pymongo_insert_opmsg + 21);
	assert_int_equal(m.body_len, wire_read_i32(fx_pymongo_insert_opmsg + 21));
	assert_ptr_equal(m.seqs[0].docs + m.seqs[0].docs_len,
	                 fx_pymongo_insert_opmsg + sizeof(fx_pymongo_insert_opmsg));
}

static void test_real_body_only(void **state)
{
	const struct {
		const uint8_t *p;
		size_t n;
	} msgs[] = {
	    {fx_pymongo_find_opmsg, sizeof(fx_pymongo_find_opmsg)},
	    {fx_ferretdb_insert_reply_opmsg, sizeof(fx_ferretdb_insert_reply_opmsg)},
	    {fx_ferretdb_find_reply_opmsg, sizeof(fx_ferretdb_find_reply_opmsg)},
	    {fx_ferretdb_error_reply_opmsg, sizeof(fx_ferretdb_error_reply_opmsg)},
	};
	for (size_t i = 0; i < sizeof(msgs) / sizeof(msgs[0]); i++) {
		opmsg m;
		wire_error err = {0};
		assert_true(opmsg_parse(msgs[i].p, msgs[i].n, &m, &err));
		assert_int_equal(m.nseqs, 0);
		assert_int_equal(m.body_len, msgs[i].n - 21);
	}
}

/* ---- valid hand-made shapes ---- */

static void test_sequences_before_and_after_body(void **state)
{
	wb b;
	bson_t *body = BCON_NEW("bulkWrite", BCON_INT32(1), "$db", "admin");
	bson_t *op = BCON_NEW("insert", BCON_INT32(0), "document", "{", "x", BCON_INT32(1), "}");
	bson_t *ns = BCON_NEW("ns", "test.c");
	start_msg(&b, 0);
	size_t s = wb_seq_begin(&b, "ops");
	wb_doc(&b, op);
	wb_doc(&b, op);
	wb_doc(&b, op);
	wb_seq_end(&b, s);
	wb_body(&b, body);
	s = wb_seq_begin(&b, "nsInfo");
	wb_doc(&b, ns);
	wb_seq_end(&b, s);
	wb_finish(&b);

	opmsg m;
	wire_error err = {0};
	assert_true(parse(&b, &m, &err));
	assert_int_equal(m.nseqs, 2);
	assert_string_equal(m.seqs[0].id, "ops");
	assert_int_equal(m.seqs[0].count, 3);
	assert_int_equal(m.seqs[0].docs_len, 3 * op->len);
	assert_string_equal(m.seqs[1].id, "nsInfo");
	assert_int_equal(m.seqs[1].count, 1);
	assert_int_equal(m.body_len, body->len);
	bson_destroy(body);
	bson_destroy(op);
	bson_destroy(ns);
}

static void test_empty_sequence(void **state)
{
	wb b;
	bson_t *body = cmd();
	start_msg(&b, 0);
	wb_body(&b, body);
	wb_seq_end(&b, wb_seq_begin(&b, "documents"));
	wb_finish(&b);
	opmsg m;
	wire_error err = {0};
	assert_true(parse(&b, &m, &err));
	assert_int_equal(m.nseqs, 1);
	assert_int_equal(m.seqs[0].count, 0);
	assert_int_equal(m.seqs[0].docs_len, 0);
	bson_destroy(body);
}

static void test_valid_checksum(void **state)
{
	/* The real insert, re-sent with checksumPresent and its CRC-32C. */
	wb b = {.n = 0};
	wb_bytes(&b, fx_pymongo_insert_opmsg, sizeof(fx_pymongo_insert_opmsg));
	wire_write_i32(b.buf + 16, OPMSG_CHECKSUM_PRESENT);
	wb_finish_checksum(&b);
	opmsg m;
	wire_error err = {0};
	assert_true(parse(&b, &m, &err));
	assert_int_equal(m.flags, OPMSG_CHECKSUM_PRESENT);
	assert_int_equal(m.nseqs, 1);
	assert_int_equal(m.seqs[0].count, 2);
	/* The sequence ends where the checksum starts. */
	assert_ptr_equal(m.seqs[0].docs + m.seqs[0].docs_len, b.buf + b.n - 4);
}

static void test_known_and_optional_flags_accepted(void **state)
{
	const uint32_t ok_flags[] = {
	    OPMSG_MORE_TO_COME,
	    OPMSG_EXHAUST_ALLOWED,
	    1u << 20, /* unknown, but optional: ignored */
	    0xffff0000u | OPMSG_MORE_TO_COME,
	};
	bson_t *body = cmd();
	for (size_t i = 0; i < sizeof(ok_flags) / sizeof(ok_flags[0]); i++) {
		wb b;
		start_msg(&b, ok_flags[i]);
		wb_body(&b, body);
		wb_finish(&b);
		opmsg m;
		wire_error err = {0};
		assert_true(parse(&b, &m, &err));
		assert_int_equal(m.flags, ok_flags[i]);
		assert_int_equal(opmsg_peek_flags(b.buf), ok_flags[i]);
	}
	bson_destroy(body);
}

static void test_build_round_trip(void **state)
{
	bson_t *body = cmd();
	size_t len;
	uint8_t *msg = opmsg_build(11, 22, OPMSG_MORE_TO_COME | OPMSG_CHECKSUM_PRESENT,
	                           bson_get_data(body), body->len, &len);
	assert_non_null(msg);
	assert_int_equal(len, 16 + 4 + 1 + body->len);
	assert_int_equal(wire_read_i32(msg), len);
	assert_int_equal(wire_read_i32(msg + 4), 11);
	assert_int_equal(wire_read_i32(msg + 8), 22);
	assert_int_equal(wire_read_i32(msg + 12), OP_MSG);
	opmsg m;
	wire_error err = {0};
	assert_true(opmsg_parse(msg, len, &m, &err));
	/* no checksum is written, so none is claimed */
	assert_int_equal(m.flags, OPMSG_MORE_TO_COME);
	assert_memory_equal(m.body, bson_get_data(body), body->len);
	free(msg);
	bson_destroy(body);
}

/* ---- flag bits ---- */

static void test_unknown_required_bits(void **state)
{
	const uint32_t bad[] = {1u << 2, 1u << 15};
	const char *what[] = {"0x4", "0x8000"};
	bson_t *body = cmd();
	for (size_t i = 0; i < 2; i++) {
		wb b;
		start_msg(&b, bad[i] | OPMSG_EXHAUST_ALLOWED);
		wb_body(&b, body);
		wb_finish(&b);
		opmsg m;
		wire_error err = {0};
		assert_false(parse(&b, &m, &err));
		assert_wire_error(err, WIRE_ERR_PROTOCOL, "unknown required flag bits");
		assert_wire_error(err, WIRE_ERR_PROTOCOL, what[i]);
	}
	bson_destroy(body);
}

/* ---- checksum ---- */

static void test_bad_checksum(void **state)
{
	wb b;
	bson_t *body = cmd();
	start_msg(&b, OPMSG_CHECKSUM_PRESENT);
	wb_body(&b, body);
	wb_finish_checksum(&b);
	b.buf[b.n - 1] ^= 0x01;
	opmsg m;
	wire_error err = {0};
	assert_false(parse(&b, &m, &err));
	assert_wire_error(err, WIRE_ERR_CHECKSUM, "checksum");
	assert_string_equal(err.code_name, "ChecksumMismatch");

	/* A flipped body byte is caught the same way. */
	b.buf[b.n - 1] ^= 0x01;
	b.buf[30] ^= 0x20;
	assert_false(parse(&b, &m, &err));
	assert_int_equal(err.code, WIRE_ERR_CHECKSUM);

	/* checksumPresent on a message with no room for one */
	start_msg(&b, OPMSG_CHECKSUM_PRESENT);
	wb_u8(&b, 0);
	wb_bytes(&b, "\x05\x00\x00\x00\x00", 5);
	wb_finish(&b);
	assert_false(parse(&b, &m, &err));
	assert_wire_error(err, WIRE_ERR_PROTOCOL, "too short to hold its checksum");
	bson_destroy(body);
}

static void test_crc32c_vectors(void **state)
{
	const uint8_t *digits = (const uint8_t *)"123456789";
	uint8_t zeros[32] = {0}, ones[32], inc[32];
	memset(ones, 0xff, sizeof(ones));
	for (int i = 0; i < 32; i++)
		inc[i] = (uint8_t)i;
	assert_int_equal(crc32c_sw(digits, 9), 0xE3069283u);
	assert_int_equal(crc32c_sw(zeros, 32), 0x8A9136AAu);
	assert_int_equal(crc32c_sw(ones, 32), 0x62A8AB43u);
	assert_int_equal(crc32c_sw(inc, 32), 0x46DD794Eu);
	assert_int_equal(crc32c_sw(digits, 0), 0);
	assert_int_equal(opmsg_crc32c(digits, 9), 0xE3069283u);
	if (!crc32c_hw_available()) {
		print_message("SSE4.2 not available: hardware path not exercised\n");
		return;
	}
	assert_int_equal(crc32c_hw(digits, 9), 0xE3069283u);
	assert_int_equal(crc32c_hw(zeros, 32), 0x8A9136AAu);
	assert_int_equal(crc32c_hw(ones, 32), 0x62A8AB43u);
	assert_int_equal(crc32c_hw(inc, 32), 0x46DD794Eu);
	assert_int_equal(crc32c_hw(digits, 0), 0);
}

/* Both paths agree on every length and alignment around the 8-byte step. */
static void test_crc32c_paths_agree(void **state)
{
	if (!crc32c_hw_available())
		skip();
	uint8_t data[300];
	uint32_t x = 2463534242u;
	for (size_t i = 0; i < sizeof(data); i++) {
		x ^= x << 13, x ^= x >> 17, x ^= x << 5;
		data[i] = (uint8_t)x;
	}
	for (size_t off = 0; off < 8; off++)
		for (size_t n = 0; n + off <= sizeof(data); n++)
			assert_int_equal(crc32c_hw(data + off, n), crc32c_sw(data + off, n));
	assert_int_equal(crc32c_hw(fx_pymongo_insert_opmsg, sizeof(fx_pymongo_insert_opmsg)),
	                 crc32c_sw(fx_pymongo_insert_opmsg, sizeof(fx_pymongo_insert_opmsg)));
}

/* ---- header and truncation ---- */

static void test_header_disagrees(void **state)
{
	opmsg m;
	wire_error err = {0};
	/* Buffer shorter than the header claims: a truncated message. */
	assert_false(
	    opmsg_parse(fx_pymongo_insert_opmsg, sizeof(fx_pymongo_insert_opmsg) - 1, &m, &err));
	assert_wire_error(err, WIRE_ERR_PROTOCOL,
	                  "OP_MSG header claims 223 bytes but the "
	                  "message has 222");
	assert_false(opmsg_parse(fx_pymongo_ismaster_opquery, sizeof(fx_pymongo_ismaster_opquery),
	                         &m, &err));
	assert_wire_error(err, WIRE_ERR_PROTOCOL, "expected OP_MSG (2013), got opcode 2004");
}

/* The real insert cut short at several points, its header length patched to
 * match so the cut is only found by reading the sections. */
static void test_truncated(void **state)
{
	const struct {
		size_t cut;
		int code;
		const char *says;
	} cases[] = {
	    {16, WIRE_ERR_PROTOCOL, "shorter than the minimum of 26"},
	    {20, WIRE_ERR_PROTOCOL, "shorter than the minimum"},
	    {25, WIRE_ERR_PROTOCOL, "shorter than the minimum"},
	    {26, WIRE_ERR_INVALID_BSON, "OP_MSG body claims 88 bytes but only 5 are left"},
	    {60, WIRE_ERR_INVALID_BSON, "OP_MSG body claims 88 bytes but only 39 are left"},
	    {108, WIRE_ERR_INVALID_BSON, "OP_MSG body claims 88 bytes but only 87 are left"},
	    {110, WIRE_ERR_PROTOCOL, "kind-1 section is truncated: 0 bytes left"},
	    {112, WIRE_ERR_PROTOCOL, "kind-1 section is truncated: 2 bytes left"},
	    {114, WIRE_ERR_PROTOCOL, "kind-1 section size 113 exceeds the 4 bytes left"},
	    {200, WIRE_ERR_PROTOCOL, "kind-1 section size 113 exceeds the 90 bytes left"},
	    {222, WIRE_ERR_PROTOCOL, "kind-1 section size 113 exceeds the 112 bytes left"},
	};
	assert_int_equal(sizeof(fx_pymongo_insert_opmsg), 223);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		wb b = {.n = 0};
		wb_bytes(&b, fx_pymongo_insert_opmsg, cases[i].cut);
		wb_finish(&b);
		opmsg m;
		wire_error err = {0};
		if (parse(&b, &m, &err))
			fail_msg("cut at %zu parsed", cases[i].cut);
		assert_wire_error(err, cases[i].code, cases[i].says);
	}
}

/* ---- sections ---- */

static void test_bad_section_kind(void **state)
{
	wb b;
	bson_t *body = cmd();
	start_msg(&b, 0);
	wb_body(&b, body);
	wb_u8(&b, 2);
	wb_doc(&b, body);
	wb_finish(&b);
	opmsg m;
	wire_error err = {0};
	assert_false(parse(&b, &m, &err));
	char want[64];
	snprintf(want, sizeof(want), "section kind 2 at byte %u is unknown", 21 + body->len);
	assert_wire_error(err, WIRE_ERR_PROTOCOL, want);
	bson_destroy(body);
}

static void test_kind1_size_overruns(void **state)
{
	wb b = {.n = 0};
	wb_bytes(&b, fx_pymongo_insert_opmsg, sizeof(fx_pymongo_insert_opmsg));
	/* the sequence's size is at 110 (after the 88-byte body and its kind byte) */
	assert_int_equal(b.buf[109], 1);
	wire_write_i32(b.buf + 110, 9999);
	opmsg m;
	wire_error err = {0};
	assert_false(parse(&b, &m, &err));
	assert_wire_error(
	    err, WIRE_ERR_PROTOCOL,
	    "OP_MSG kind-1 section size 9999 exceeds the 113 bytes left in the message");

	wire_write_i32(b.buf + 110, 4);
	assert_false(parse(&b, &m, &err));
	assert_wire_error(err, WIRE_ERR_PROTOCOL, "kind-1 section size 4 is below the minimum");

	wire_write_i32(b.buf + 110, -5);
	assert_false(parse(&b, &m, &err));
	assert_wire_error(err, WIRE_ERR_PROTOCOL, "kind-1 section size -5");
}

static void test_kind1_size_underruns(void **state)
{
	wb b = {.n = 0};
	wb_bytes(&b, fx_pymongo_insert_opmsg, sizeof(fx_pymongo_insert_opmsg));
	opmsg m;
	wire_error err = {0};
	/* Ends inside the second document. */
	wire_write_i32(b.buf + 110, 113 - 10);
	assert_false(parse(&b, &m, &err));
	assert_wire_error(err, WIRE_ERR_INVALID_BSON,
	                  "document 2 of OP_MSG sequence 'documents' "
	                  "claims");
	/* Ends at a document boundary: what follows is read as a section and its
	 * first byte (the second document's length) is no section kind. */
	size_t doc1_at = 110 + 4 + strlen("documents") + 1;
	int32_t doc1 = wire_read_i32(b.buf + doc1_at);
	wire_write_i32(b.buf + 110, (int32_t)(doc1_at - 110) + doc1);
	assert_false(parse(&b, &m, &err));
	assert_wire_error(err, WIRE_ERR_PROTOCOL, "is unknown");
	/* Ends inside the identifier. */
	wire_write_i32(b.buf + 110, 8);
	assert_false(parse(&b, &m, &err));
	assert_wire_error(err, WIRE_ERR_PROTOCOL, "identifier is not NUL-terminated");
}

static void test_sequence_doc_length_lies(void **state)
{
	size_t doc1_at = 110 + 4 + strlen("documents") + 1;
	opmsg m;
	wire_error err = {0};
	wb b = {.n = 0};
	wb_bytes(&b, fx_pymongo_insert_opmsg, sizeof(fx_pymongo_insert_opmsg));
	int32_t doc1 = wire_read_i32(b.buf + doc1_at);

	/* One byte long: its last byte is the next document's length. */
	assert_int_equal(doc1, 59);
	wire_write_i32(b.buf + doc1_at, doc1 + 1);
	assert_false(parse(&b, &m, &err));
	assert_wire_error(err, WIRE_ERR_INVALID_BSON,
	                  "document 1 of OP_MSG sequence 'documents' of 60 bytes does not end "
	                  "with a 0x00 terminator");

	wire_write_i32(b.buf + doc1_at, 1000);
	assert_false(parse(&b, &m, &err));
	assert_wire_error(err, WIRE_ERR_INVALID_BSON,
	                  "document 1 of OP_MSG sequence 'documents' claims 1000 bytes but only "
	                  "99 are left");

	wire_write_i32(b.buf + doc1_at, 4);
	assert_false(parse(&b, &m, &err));
	assert_wire_error(err, WIRE_ERR_INVALID_BSON, "has length 4, below the minimum of 5");
}

static void test_duplicate_sequence_ids(void **state)
{
	wb b;
	bson_t *body = cmd(), *doc = BCON_NEW("x", BCON_INT32(1));
	start_msg(&b, 0);
	wb_body(&b, body);
	for (int i = 0; i < 2; i++) {
		size_t s = wb_seq_begin(&b, "documents");
		wb_doc(&b, doc);
		wb_seq_end(&b, s);
	}
	wb_finish(&b);
	opmsg m;
	wire_error err = {0};
	assert_false(parse(&b, &m, &err));
	assert_wire_error(err, WIRE_ERR_PROTOCOL, "two kind-1 sections named 'documents'");
	bson_destroy(body);
	bson_destroy(doc);
}

static void test_body_key_is_sequence_id(void **state)
{
	wb b;
	bson_t *body = BCON_NEW("insert", "c", "documents", "[", "]", "$db", "test");
	bson_t *doc = BCON_NEW("x", BCON_INT32(1));
	start_msg(&b, 0);
	size_t s = wb_seq_begin(&b, "documents");
	wb_doc(&b, doc);
	wb_seq_end(&b, s);
	wb_body(&b, body);
	wb_finish(&b);
	opmsg m;
	wire_error err = {0};
	assert_false(parse(&b, &m, &err));
	assert_wire_error(err, WIRE_ERR_PROTOCOL,
	                  "field 'documents' is both a body key and a kind-1 section identifier");
	bson_destroy(body);
	bson_destroy(doc);
}

static void test_zero_or_two_bodies(void **state)
{
	wb b;
	bson_t *body = cmd(), *doc = BCON_NEW("x", BCON_INT32(1));
	opmsg m;
	wire_error err = {0};

	start_msg(&b, 0);
	size_t s = wb_seq_begin(&b, "documents");
	wb_doc(&b, doc);
	wb_seq_end(&b, s);
	wb_finish(&b);
	assert_false(parse(&b, &m, &err));
	assert_wire_error(err, WIRE_ERR_PROTOCOL, "has no kind-0 section");

	start_msg(&b, 0);
	wb_body(&b, body);
	wb_body(&b, body);
	wb_finish(&b);
	assert_false(parse(&b, &m, &err));
	assert_wire_error(err, WIRE_ERR_PROTOCOL, "more than one kind-0 section");
	bson_destroy(body);
	bson_destroy(doc);
}

static void test_too_many_sequences(void **state)
{
	wb b;
	bson_t *body = cmd();
	start_msg(&b, 0);
	wb_body(&b, body);
	for (int i = 0; i <= OPMSG_MAX_SEQUENCES; i++) {
		char id[16];
		snprintf(id, sizeof(id), "s%d", i);
		wb_seq_end(&b, wb_seq_begin(&b, id));
	}
	opmsg m;
	wire_error err = {0};
	wb_finish(&b);
	assert_false(parse(&b, &m, &err));
	assert_wire_error(err, WIRE_ERR_PROTOCOL, "more than 8 kind-1 sections");

	/* exactly the maximum is fine */
	start_msg(&b, 0);
	wb_body(&b, body);
	for (int i = 0; i < OPMSG_MAX_SEQUENCES; i++) {
		char id[16];
		snprintf(id, sizeof(id), "s%d", i);
		wb_seq_end(&b, wb_seq_begin(&b, id));
	}
	wb_finish(&b);
	assert_true(parse(&b, &m, &err));
	assert_int_equal(m.nseqs, OPMSG_MAX_SEQUENCES);
	bson_destroy(body);
}

/* ---- the body's BSON ---- */

static void raw_body_msg(wb *b, const void *doc, size_t n)
{
	start_msg(b, 0);
	wb_u8(b, 0);
	wb_bytes(b, doc, n);
	wb_finish(b);
}

static void test_invalid_bson_body(void **state)
{
	opmsg m;
	wire_error err = {0};
	wb b;

	/* {a: 1} is 0c000000 10 6100 01000000 00 */
	const uint8_t good[] = {0x0c, 0, 0, 0, 0x10, 'a', 0, 1, 0, 0, 0, 0};
	raw_body_msg(&b, good, sizeof(good));
	assert_true(parse(&b, &m, &err));

	const uint8_t short_len[] = {0x04, 0, 0, 0, 0x10, 'a', 0, 1, 0, 0, 0, 0};
	raw_body_msg(&b, short_len, sizeof(short_len));
	assert_false(parse(&b, &m, &err));
	assert_wire_error(err, WIRE_ERR_INVALID_BSON,
	                  "OP_MSG body has length 4, below the minimum");

	const uint8_t long_len[] = {0x0d, 0, 0, 0, 0x10, 'a', 0, 1, 0, 0, 0, 0};
	raw_body_msg(&b, long_len, sizeof(long_len));
	assert_false(parse(&b, &m, &err));
	assert_wire_error(err, WIRE_ERR_INVALID_BSON, "OP_MSG body claims 13 bytes but only 12");

	const uint8_t no_nul[] = {0x0c, 0, 0, 0, 0x10, 'a', 0, 1, 0, 0, 0, 7};
	raw_body_msg(&b, no_nul, sizeof(no_nul));
	assert_false(parse(&b, &m, &err));
	assert_wire_error(err, WIRE_ERR_INVALID_BSON, "does not end with a 0x00 terminator");

	const uint8_t bad_type[] = {0x0c, 0, 0, 0, 0x20, 'a', 0, 1, 0, 0, 0, 0};
	raw_body_msg(&b, bad_type, sizeof(bad_type));
	assert_false(parse(&b, &m, &err));
	assert_wire_error(err, WIRE_ERR_INVALID_BSON, "OP_MSG body is not valid BSON");

	/* {s: "hi"} whose string length says 9 */
	const uint8_t bad_str[] = {0x0f, 0, 0, 0, 0x02, 's', 0, 9, 0, 0, 0, 'h', 'i', 0, 0};
	raw_body_msg(&b, bad_str, sizeof(bad_str));
	assert_false(parse(&b, &m, &err));
	assert_wire_error(err, WIRE_ERR_INVALID_BSON, "not valid BSON");

	/* {d: {}} whose inner document claims 6 bytes: only a full walk sees it */
	const uint8_t bad_nested[] = {0x0d, 0, 0, 0, 0x03, 'd', 0, 6, 0, 0, 0, 0, 0};
	raw_body_msg(&b, bad_nested, sizeof(bad_nested));
	assert_false(parse(&b, &m, &err));
	assert_wire_error(err, WIRE_ERR_INVALID_BSON, "not valid BSON");

	/* an element running past the terminator: int32 with 3 bytes */
	const uint8_t trunc_elem[] = {0x0b, 0, 0, 0, 0x10, 'a', 0, 1, 0, 0, 0};
	raw_body_msg(&b, trunc_elem, sizeof(trunc_elem));
	assert_false(parse(&b, &m, &err));
	assert_int_equal(err.code, WIRE_ERR_INVALID_BSON);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_real_insert_body_then_sequence),
	    cmocka_unit_test(test_real_body_only),
	    cmocka_unit_test(test_sequences_before_and_after_body),
	    cmocka_unit_test(test_empty_sequence),
	    cmocka_unit_test(test_valid_checksum),
	    cmocka_unit_test(test_known_and_optional_flags_accepted),
	    cmocka_unit_test(test_build_round_trip),
	    cmocka_unit_test(test_unknown_required_bits),
	    cmocka_unit_test(test_bad_checksum),
	    cmocka_unit_test(test_crc32c_vectors),
	    cmocka_unit_test(test_crc32c_paths_agree),
	    cmocka_unit_test(test_header_disagrees),
	    cmocka_unit_test(test_truncated),
	    cmocka_unit_test(test_bad_section_kind),
	    cmocka_unit_test(test_kind1_size_overruns),
	    cmocka_unit_test(test_kind1_size_underruns),
	    cmocka_unit_test(test_sequence_doc_length_lies),
	    cmocka_unit_test(test_duplicate_sequence_ids),
	    cmocka_unit_test(test_body_key_is_sequence_id),
	    cmocka_unit_test(test_zero_or_two_bodies),
	    cmocka_unit_test(test_too_many_sequences),
	    cmocka_unit_test(test_invalid_bson_body),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
