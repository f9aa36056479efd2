/* Query shapes: the part of a command a human needs to recognise a query,
 * as compact JSON, with literal values replaced by type placeholders the way
 * MongoDB's query stats do ("?string", "?number", "?array<?number>",
 * "?regex/i", ...), and a stable 64-bit hash of it.
 *
 * What is data and what is structure depends on where a value sits, so each
 * part of a command is rendered in a mode: a filter keeps its field names and
 * operators and replaces operands; a sort spec is kept verbatim (field names
 * and ±1 are not data); an aggregation expression keeps field paths ("$a");
 * a pipeline renders each stage by its kind ($lookup keeps from/localField/
 * foreignField/as). Arrays of literals collapse to "?array<?type>", so an $in
 * list of 3 and one of 300 values give the same shape.
 *
 * Rendering writes into a caller's fixed buffer and never allocates (except
 * for rare BSON types when redaction is off). Output is always valid JSON:
 * when the buffer runs out, the open containers are closed and the top-level
 * object gets "$truncated":true. */
#ifndef MG_ANALYZERS_ENGINE_SHAPE_H
#define MG_ANALYZERS_ENGINE_SHAPE_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "protocol/wire_iter.h"

/* Big enough for any realistic query; larger ones are truncated. */
#define SHAPE_BUF_LEN 8192
/* Deeper values are written as "?deep"; also bounds the writer's stack. */
#define SHAPE_MAX_DEPTH 48

typedef enum {
	SHAPE_VERBATIM,    /* not application data: sort specs, names, collations */
	SHAPE_DATA,        /* a literal value */
	SHAPE_FILTER,      /* a query filter (match expression) */
	SHAPE_EXPR,        /* an aggregation expression */
	SHAPE_PIPELINE,    /* an array of aggregation stages */
	SHAPE_UPDATE,      /* operators, a replacement document, or a pipeline */
	SHAPE_FILTER_LIST, /* an array of filters (arrayFilters) */
} shape_mode;

/* One "key": value member of the shape. */
typedef struct shape_part {
	const char *key;
	shape_mode mode;
	const char *str; /* non-NULL: write this string verbatim, ignore value */
	wire_cur value;  /* on the value: a cursor, since a statement's parts are
	                  * kept for every statement and rendered for few */
} shape_part;

typedef struct shape_spec {
	const char *command; /* "find", "aggregate", "update", "bulkWrite", ... */
	const char *target;  /* collection name ("db.coll" for bulkWrite); NULL writes 1 */
	bool explain;        /* wrap the whole as {"explain": {...}} */
	const shape_part *parts;
	size_t nparts;
} shape_spec;

/* Renders {"<command>":"<target>", "<key>": <value>, ...} into buf (cap >= 128)
 * with literals replaced (redact) or shown as they are. Returns the length;
 * buf is NUL-terminated. */
size_t shape_render(const shape_spec *s, bool redact, char *buf, size_t cap);

/* The same; *values (may be NULL) says whether a fixed-size value (a
 * number, a date, an ObjectId, a timestamp: what a byte template of the
 * request leaves free) was shown as it is. When none was, a request that
 * differs only in such values has the same shape. */
size_t shape_render_values(const shape_spec *s, bool redact, char *buf, size_t cap, bool *values);

/* Renders one value alone (tests and suggestions use it). */
size_t shape_render_value(const bson_iter_t *value, shape_mode mode, bool redact, char *buf,
                          size_t cap);

/* FNV-1a 64 over ns "\0" command "\0" shape. Always computed over the
 * redacted shape, so the hash is the same whether or not redaction is on. */
uint64_t shape_hash(const char *ns, const char *command, const char *shape);

/* 16 lower-case hex digits and a NUL. */
void shape_hash_hex(uint64_t h, char out[17]);

#endif
