/* A finding and the sink that receives it: the one type the engine, the
 * dedupe table and the proxy's log all speak. Types only. */
#ifndef MG_ANALYZERS_ENGINE_FINDING_H
#define MG_ANALYZERS_ENGINE_FINDING_H

#include <stdbool.h>
#include <stdint.h>

#include "analyzers/engine/rule_config.h"

/* One finding, as the sink receives it. Strings are valid only during the
 * sink call. */
typedef struct finding {
	rule_id rule;
	rule_action action; /* after scoping; explain never reports block */
	const char *ns;     /* "db.collection" */
	const char *command;
	uint64_t shape_hash;
	/* The request's own shape hash: shape_hash, but for a finding whose
	 * hash names more than its request (a pair of reads on a connection)
	 * the hash of the request it was reported at. 0 in a summary. */
	uint64_t request_hash;
	const char *shape;      /* JSON text, literals replaced unless redaction is off */
	const char *suggestion; /* how to fix it, runnable where possible */
	const char *detail;     /* what exactly matched, e.g. "name: $regex with $options 'i'" */
	const char *app_name;   /* "" when the client sent none */
	const char *client;     /* "host:port" */
	uint64_t conn;          /* the connection it came from (request_ctx.conn); 0: none */
	uint64_t repeats;       /* 0 for a first occurrence; N for a summary of N repeats */
	/* dry-run only: the error a block would have sent, and whether the
	 * rule said block and its sample left this shape out. */
	const char *would_block;
	bool sampled_out;
	/* judged after the request went on, once its facts arrived (the same
	 * finding as an on-time one: same shape hash, counts and sinks) */
	bool late;
} finding;

typedef void (*engine_sink_fn)(void *arg, const finding *f);

/* Told of every finding as it happens, a first occurrence or a repeat the
 * sink hears of only in the next summary: for counters that must not lag
 * behind the summaries (engine_set_tally). */
typedef void (*engine_tally_fn)(void *arg, rule_id rule, rule_action action);

#endif
