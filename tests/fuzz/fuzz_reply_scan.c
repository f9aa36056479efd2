/* libFuzzer target: the reply reader of the request path
 * (proxy/stats/reply_scan.c), which reads the upstream's replies with a
 * walker of its own: ok, code, writeErrors, n and a cursor's batch
 * (reply_scan_read), the values of a first batch (reply_scan_values), and
 * whether a createIndexes changed nothing (reply_scan_indexes_unchanged).
 * The input is a control byte and a body: bit 0 wraps it as an OP_REPLY
 * instead of an OP_MSG, bit 1 adds an OP_MSG checksum's four bytes, bit 2
 * takes the input whole as the message (its length field set to its
 * size).
 *
 * Checked: each reader touches only the message's bytes (an exact-size
 * heap copy, under ASan and UBSan); and where the body is valid BSON and
 * the capture's writer reads the reply (capture_reply_inspect: libbson,
 * after the decoder's structural check), the walker reads it too, with
 * the same ok, code, writeErrors count and n, as test_proxy_workload's
 * test_reply_scan_matches_capture asserts by hand: the live workload
 * table and the report count alike. */
#include <bson/bson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/capture.h"
#include "protocol/value_filter.h"
#include "proxy/stats/reply_scan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { HEADER = 16, OP_REPLY_CODE = 1, OP_MSG_CODE = 2013, MAX_BODY = 1 << 20 };

static void put32(uint8_t *p, uint32_t v)
{
	memcpy(p, &v, 4); /* little-endian hosts: the fuzzers run on x86-64 */
}

/* The message the input describes, in a heap block of its exact size. */
static uint8_t *message_of(const uint8_t *data, size_t size, size_t *len, const uint8_t **body,
                           size_t *blen)
{
	uint8_t ctl = data[0];
	const uint8_t *b = data + 1;
	size_t bl = size - 1;
	uint8_t *m;
	*body = NULL;
	if (ctl & 4) {
		*len = bl;
		if (!(m = malloc(bl ? bl : 1)))
			abort();
		memcpy(m, b, bl);
		if (bl >= 4)
			put32(m, (uint32_t)bl);
		return m;
	}
	bool reply = ctl & 1, sum = !reply && (ctl & 2);
	size_t pre = reply ? HEADER + 20 : HEADER + 5;
	*len = pre + bl + (sum ? 4 : 0);
	if (!(m = calloc(1, *len)))
		abort();
	put32(m, (uint32_t)*len);
	put32(m + 12, reply ? OP_REPLY_CODE : OP_MSG_CODE);
	if (reply)
		put32(m + HEADER + 12, 1); /* numberReturned */
	else
		put32(m + HEADER, sum ? 1 : 0);
	memcpy(m + pre, b, bl);
	*body = m + pre;
	*blen = bl;
	return m;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1 || size > MAX_BODY)
		return 0;
	size_t len, blen = 0;
	const uint8_t *body;
	uint8_t *m = message_of(data, size, &len, &body, &blen);
	reply_scan sc;
	bool read = reply_scan_read(m, len, &sc);
	if (read) {
		value_filter vf;
		(void)reply_scan_values(&sc, &vf);
	}
	(void)reply_scan_indexes_unchanged(m, len);
	/* Compared only where both readers can read: the capture's reader
	 * checks a checksum and reads no reply whose sum is wrong (as the
	 * input's zeros are); libbson stops at a bad byte the walker steps
	 * over (a boolean of 0xfb), so the body must be valid BSON; and the
	 * capture's reader parses the message as the decoder does
	 * (wire_doc_validate, the structural check opmsg_parse makes of an
	 * OP_MSG's body and the reader makes of an OP_REPLY's document;
	 * stricter than libbson's: an array's keys, say), reading nothing
	 * it refuses. */
	bool summed = !(data[0] & 1) && (data[0] & 2);
	bson_t b;
	if (body && !summed && bson_init_static(&b, body, blen) &&
	    bson_validate(&b, BSON_VALIDATE_NONE, NULL)) {
		capture_reply_facts cf;
		capture_reply_inspect(m, len, false, &cf);
		if (cf.read && (!read || sc.ok != cf.ok || sc.code != cf.code ||
		                sc.write_errors != cf.write_errors || sc.n != cf.n)) {
			fprintf(stderr,
			        "fuzz_reply_scan: the walker and the capture's reader disagree: "
			        "read %d/%d ok %d/%d "
			        "code %d/%d writeErrors %lld/%lld n %lld/%lld\n",
			        read, cf.read, sc.ok, cf.ok, sc.code, cf.code,
			        (long long)sc.write_errors, (long long)cf.write_errors,
			        (long long)sc.n, (long long)cf.n);
			abort();
		}
		capture_reply_facts_free(&cf);
	}
	free(m);
	return 0;
}
