/* libFuzzer target: the client-side-join (analyzers/rules/rule_join.c) rule alone, at block
 * (which it takes as dry-run), on one connection. An input is the connection's requests: BSON
 * command bodies one after another, each judged with the connection's track and repeat
 * template, then, when it has an int32 "fuzzDocs", a reply of that many documents (negative:
 * not known) told to the engine, so one input builds parents, chains and findings. Each body
 * is also judged without a track (fz_run): forwarded either way. */
#include "fuzz_common.h"

#include "analyzers/rules/rule_join.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void one_request(engine *e, engine_conn_track **track, engine_repeat **repeat,
                        const uint8_t *data, size_t size)
{
	opmsg m;
	cmdview v;
	uint8_t *msg = fz_body_view(data, size, &m, &v);
	if (!msg)
		return;
	fz_clock += 3;
	request_ctx rc = {.app_name = "",
	                  .client = "127.0.0.1:1",
	                  .now_ms = fz_clock,
	                  .no_wait = true,
	                  .repeat = repeat,
	                  .track = track};
	block_info b;
	if (engine_analyze(e, &v, &rc, &b) != VERDICT_FORWARD)
		abort(); /* it never blocks, and no_wait never waits */
	bson_iter_t it;
	if (bson_iter_init_find(&it, &v.body, "fuzzDocs") && BSON_ITER_HOLDS_INT32(&it))
		engine_note_reply(e, *track, bson_iter_int32(&it), NULL, fz_clock + 1);
	fz_run(&e, 1, &v);
	free(msg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static engine *e;
	if (!e) {
		engine_config cfg;
		fz_config(&cfg, RULE_CLIENT_SIDE_JOIN);
		cfg.rules[RULE_CLIENT_SIDE_JOIN].params[JOIN_PARAM_MIN_FANOUT] = 2;
		fz_only_rule = RULE_CLIENT_SIDE_JOIN;
		fz_setup_cache();
		e = engine_new(&cfg, fz_ic, fz_sink, &fz_sink_total);
	}
	engine_conn_track *track = NULL;
	engine_repeat *repeat = NULL;
	for (int n = 0; size >= 5 && n < 256; n++) {
		size_t len = wire_read_u32(data);
		if (len < 5 || len > size)
			len = size; /* the rest, as one body with its sections */
		one_request(e, &track, &repeat, data, len);
		data += len;
		size -= len;
	}
	engine_conn_track_free(track);
	engine_repeat_free(repeat);
	return 0;
}
