/* Query shapes: rendering with literals replaced, and hashing.
 *
 * The writer emits tokens atomically: a comma, a key and a scalar (or an
 * opening bracket) either all fit or none is written, and the bytes needed
 * to close every open container plus the truncation marker are reserved up
 * front. That is what keeps truncated output valid JSON. */
#include "analyzers/engine/shape.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "protocol/text.h"
#include "protocol/wire_iter.h"

/* Internal mode beyond the public ones: a field's operator document. */
#define SHAPE_PREDICATE ((shape_mode)(SHAPE_FILTER_LIST + 1))

#define TRUNC_MARKER "\"$truncated\":true"
/* closers + comma + marker + NUL */
#define RESERVE (SHAPE_MAX_DEPTH + 2 + sizeof(TRUNC_MARKER))

typedef struct jw {
	text_buf t;  /* appends stop at the reserve; t.overflow: the current
	                token did not fit */
	bool full;   /* a token did not fit: everything after it is dropped */
	int skipped; /* containers opened (and dropped) after the writer filled */
	int depth;
	char closer[SHAPE_MAX_DEPTH + 2];
	bool comma[SHAPE_MAX_DEPTH + 2]; /* a member was written at this depth */
	bool redact;
	bool values; /* a fixed-size value was shown (shape_render_values) */
} jw;

static void put(jw *w, const char *s, size_t n)
{
	text_put(&w->t, s, n);
}

static void putc_(jw *w, char c)
{
	text_char(&w->t, c);
}

/* Bytes as they are: the hash is over them, so they never change. */
static void put_escaped(jw *w, const char *s, size_t n)
{
	text_json_str(&w->t, s, n, TEXT_JSON_QUOTED);
}

/* Starts a token: comma and key. False when the writer is already full. */
static bool tok_begin(jw *w, const char *key, size_t *save)
{
	if (w->full)
		return false;
	*save = text_mark(&w->t);
	w->t.overflow = false;
	if (w->comma[w->depth])
		putc_(w, ',');
	if (key) {
		put_escaped(w, key, strlen(key));
		putc_(w, ':');
	}
	return true;
}

static bool tok_end(jw *w, size_t save)
{
	if (w->t.overflow) {
		text_rewind(&w->t, save);
		w->full = true;
		return false;
	}
	w->comma[w->depth] = true;
	return true;
}

static void w_raw(jw *w, const char *key, const char *raw, size_t n)
{
	size_t save;
	if (!tok_begin(w, key, &save))
		return;
	put(w, raw, n);
	tok_end(w, save);
}

static void w_str(jw *w, const char *key, const char *s, size_t n)
{
	size_t save;
	if (!tok_begin(w, key, &save))
		return;
	put_escaped(w, s, n);
	tok_end(w, save);
}

static void w_cstr(jw *w, const char *key, const char *s)
{
	w_str(w, key, s, strlen(s));
}

static void w_open(jw *w, const char *key, char open)
{
	size_t save;
	if (w->full || w->depth >= SHAPE_MAX_DEPTH + 1) {
		w->skipped++;
		return;
	}
	tok_begin(w, key, &save);
	putc_(w, open);
	if (!tok_end(w, save)) {
		w->skipped++;
		return;
	}
	w->depth++;
	w->closer[w->depth] = open == '{' ? '}' : ']';
	w->comma[w->depth] = false;
}

/* Closers always fit: RESERVE holds them. */
static void w_close(jw *w)
{
	if (w->skipped > 0) {
		w->skipped--;
		return;
	}
	if (w->depth <= 0)
		return;
	if (w->depth == 1 && w->full && w->closer[1] == '}') {
		if (w->comma[1])
			text_close(&w->t, ",");
		text_close(&w->t, TRUNC_MARKER);
	}
	char c[2] = {w->closer[w->depth], '\0'};
	text_close(&w->t, c);
	w->depth--;
}

static void jw_init(jw *w, char *buf, size_t cap, bool redact)
{
	memset(w, 0, sizeof(*w));
	text_init_reserve(&w->t, buf, cap, RESERVE);
	w->redact = redact;
}

static size_t jw_finish(jw *w)
{
	while (w->depth > 0 || w->skipped > 0)
		w_close(w);
	text_finish(&w->t);
	return w->t.len;
}

/* ---- placeholders ---- */

/* A literal's placeholder names its type only: two queries that differ
 * in values share a shape, and no application data reaches the log. */
static const char *type_placeholder(const bson_iter_t *it)
{
	switch (wire_iter_type(it)) {
	case BSON_TYPE_UTF8:
		return "?string";
	case BSON_TYPE_INT32:
	case BSON_TYPE_INT64:
	case BSON_TYPE_DOUBLE:
	case BSON_TYPE_DECIMAL128:
		return "?number";
	case BSON_TYPE_BOOL:
		return "?bool";
	case BSON_TYPE_DATE_TIME:
		return "?date";
	case BSON_TYPE_OID:
		return "?objectId";
	case BSON_TYPE_NULL:
		return "?null";
	case BSON_TYPE_UNDEFINED:
		return "?undefined";
	case BSON_TYPE_BINARY:
		return "?binData";
	case BSON_TYPE_REGEX:
		return "?regex";
	case BSON_TYPE_TIMESTAMP:
		return "?timestamp";
	case BSON_TYPE_DOCUMENT:
		return "?object";
	case BSON_TYPE_ARRAY:
		return "?array";
	case BSON_TYPE_MINKEY:
		return "?minKey";
	case BSON_TYPE_MAXKEY:
		return "?maxKey";
	case BSON_TYPE_CODE:
	case BSON_TYPE_CODEWSCOPE:
		return "?javascript";
	case BSON_TYPE_SYMBOL:
		return "?symbol";
	case BSON_TYPE_DBPOINTER:
		return "?dbPointer";
	default:
		return "?unknown";
	}
}

/* A scalar's placeholder; regexes keep their flags ("?regex/i"). */
static size_t placeholder(const bson_iter_t *it, char *out, size_t cap)
{
	if (WIRE_ITER_HOLDS_REGEX(it)) {
		const char *opts = NULL;
		bson_iter_regex(it, &opts);
		if (opts && *opts)
			return (size_t)snprintf(out, cap, "?regex/%.16s", opts);
	}
	return (size_t)snprintf(out, cap, "%s", type_placeholder(it));
}

static void w_placeholder(jw *w, const char *key, const bson_iter_t *it)
{
	char ph[40];
	size_t n = placeholder(it, ph, sizeof(ph));
	w_str(w, key, ph, n < sizeof(ph) ? n : sizeof(ph) - 1);
}

/* "?array<?number>" when every element has the same placeholder, "?array"
 * when they differ or there are none. */
static void w_array_placeholder(jw *w, const char *key, const bson_iter_t *arr)
{
	bson_iter_t c;
	char first[40] = "", cur[40];
	bool mixed = false, any = false;
	if (wire_iter_recurse(arr, &c)) {
		while (wire_iter_next(&c)) {
			placeholder(&c, cur, sizeof(cur));
			if (!any) {
				memcpy(first, cur, sizeof(first));
				any = true;
			} else if (strcmp(first, cur) != 0) {
				mixed = true;
				break;
			}
		}
	}
	if (!any || mixed) {
		w_cstr(w, key, "?array");
		return;
	}
	char ph[64];
	int n = snprintf(ph, sizeof(ph), "?array<%s>", first);
	w_str(w, key, ph, (size_t)n < sizeof(ph) ? (size_t)n : sizeof(ph) - 1);
}

/* ---- verbatim values (extended JSON, relaxed where it reads better) ---- */

static void render_verbatim(jw *w, const char *key, const bson_iter_t *it, int depth);

static void w_base64(jw *w, const uint8_t *p, uint32_t n)
{
	static const char tbl[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	for (uint32_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16;
		if (i + 1 < n)
			v |= (uint32_t)p[i + 1] << 8;
		if (i + 2 < n)
			v |= p[i + 2];
		char q[4] = {tbl[(v >> 18) & 63], tbl[(v >> 12) & 63],
		             i + 1 < n ? tbl[(v >> 6) & 63] : '=', i + 2 < n ? tbl[v & 63] : '='};
		put(w, q, 4);
	}
}

/* Long on purpose: one case per BSON type, each its extended-JSON form. It
 * reads as a table; split up, the table would be scattered over helpers. */
static void render_verbatim_scalar(jw *w, const char *key, const bson_iter_t *it)
{
	char num[64];
	int n;
	size_t save;
	bson_type_t ty = wire_iter_type(it);
	w->values |= ty == BSON_TYPE_DOUBLE || ty == BSON_TYPE_OID || ty == BSON_TYPE_DATE_TIME ||
	             ty == BSON_TYPE_INT32 || ty == BSON_TYPE_TIMESTAMP || ty == BSON_TYPE_INT64 ||
	             ty == BSON_TYPE_DECIMAL128;
	switch (ty) {
	case BSON_TYPE_UTF8: {
		uint32_t len;
		const char *s = bson_iter_utf8(it, &len);
		w_str(w, key, s, len);
		return;
	}
	case BSON_TYPE_INT32:
		n = snprintf(num, sizeof(num), "%d", bson_iter_int32(it));
		w_raw(w, key, num, (size_t)n);
		return;
	case BSON_TYPE_INT64:
		n = snprintf(num, sizeof(num), "%lld", (long long)bson_iter_int64(it));
		w_raw(w, key, num, (size_t)n);
		return;
	case BSON_TYPE_DOUBLE: {
		double d = bson_iter_double(it);
		if (isnan(d) || isinf(d)) {
			n = snprintf(num, sizeof(num), "{\"$numberDouble\":\"%s\"}",
			             isnan(d) ? "NaN" : (d > 0 ? "Infinity" : "-Infinity"));
		} else if (d == floor(d) && fabs(d) < 1e15) {
			n = snprintf(num, sizeof(num), "%.1f", d);
		} else {
			n = snprintf(num, sizeof(num), "%.17g", d);
		}
		w_raw(w, key, num, (size_t)n);
		return;
	}
	case BSON_TYPE_DECIMAL128: {
		bson_decimal128_t dec;
		char s[BSON_DECIMAL128_STRING];
		bson_iter_decimal128(it, &dec);
		bson_decimal128_to_string(&dec, s);
		n = snprintf(num, sizeof(num), "{\"$numberDecimal\":\"%s\"}", s);
		w_raw(w, key, num, (size_t)n);
		return;
	}
	case BSON_TYPE_BOOL:
		w_raw(w, key, bson_iter_bool(it) ? "true" : "false", bson_iter_bool(it) ? 4 : 5);
		return;
	case BSON_TYPE_NULL:
		w_raw(w, key, "null", 4);
		return;
	case BSON_TYPE_UNDEFINED:
		w_raw(w, key, "{\"$undefined\":true}", 19);
		return;
	case BSON_TYPE_MINKEY:
		w_raw(w, key, "{\"$minKey\":1}", 13);
		return;
	case BSON_TYPE_MAXKEY:
		w_raw(w, key, "{\"$maxKey\":1}", 13);
		return;
	case BSON_TYPE_DATE_TIME:
		n = snprintf(num, sizeof(num), "{\"$date\":%lld}",
		             (long long)bson_iter_date_time(it));
		w_raw(w, key, num, (size_t)n);
		return;
	case BSON_TYPE_OID: {
		char hex[25];
		bson_oid_to_string(bson_iter_oid(it), hex);
		n = snprintf(num, sizeof(num), "{\"$oid\":\"%s\"}", hex);
		w_raw(w, key, num, (size_t)n);
		return;
	}
	case BSON_TYPE_TIMESTAMP: {
		uint32_t t, i;
		bson_iter_timestamp(it, &t, &i);
		n = snprintf(num, sizeof(num), "{\"$timestamp\":{\"t\":%u,\"i\":%u}}", t, i);
		w_raw(w, key, num, (size_t)n);
		return;
	}
	case BSON_TYPE_REGEX: {
		const char *opts = NULL;
		const char *pat = bson_iter_regex(it, &opts);
		if (!tok_begin(w, key, &save))
			return;
		put(w, "{\"$regex\":", 10);
		put_escaped(w, pat, strlen(pat));
		put(w, ",\"$options\":", 12);
		put_escaped(w, opts ? opts : "", opts ? strlen(opts) : 0);
		putc_(w, '}');
		tok_end(w, save);
		return;
	}
	case BSON_TYPE_BINARY: {
		bson_subtype_t sub;
		uint32_t len;
		const uint8_t *data;
		bson_iter_binary(it, &sub, &len, &data);
		if (!tok_begin(w, key, &save))
			return;
		put(w, "{\"$binary\":{\"base64\":\"", 22);
		w_base64(w, data, len);
		n = snprintf(num, sizeof(num), "\",\"subType\":\"%02x\"}}", (unsigned)sub);
		put(w, num, (size_t)n);
		tok_end(w, save);
		return;
	}
	case BSON_TYPE_CODE: {
		uint32_t len;
		const char *code = bson_iter_code(it, &len);
		if (!tok_begin(w, key, &save))
			return;
		put(w, "{\"$code\":", 9);
		put_escaped(w, code, len);
		putc_(w, '}');
		tok_end(w, save);
		return;
	}
	default:
		/* symbol, dbPointer, code with scope: deprecated types; a
		 * placeholder says enough even for staging. */
		w_placeholder(w, key, it);
		return;
	}
}

static void render_verbatim(jw *w, const char *key, const bson_iter_t *it, int depth)
{
	bool doc = WIRE_ITER_HOLDS_DOCUMENT(it), arr = WIRE_ITER_HOLDS_ARRAY(it);
	if (!doc && !arr) {
		render_verbatim_scalar(w, key, it);
		return;
	}
	if (depth >= SHAPE_MAX_DEPTH) {
		w_cstr(w, key, "?deep");
		return;
	}
	bson_iter_t c;
	w_open(w, key, doc ? '{' : '[');
	if (wire_iter_recurse(it, &c))
		while (wire_iter_next(&c))
			render_verbatim(w, doc ? wire_iter_key(&c) : NULL, &c, depth + 1);
	w_close(w);
}

/* ---- modes ---- */

static void render(jw *w, const char *key, const bson_iter_t *it, shape_mode mode, int depth);

static bool first_key_is_operator(const bson_iter_t *it)
{
	bson_iter_t c;
	return WIRE_ITER_HOLDS_DOCUMENT(it) && wire_iter_recurse(it, &c) && wire_iter_next(&c) &&
	       wire_iter_key(&c)[0] == '$';
}

/* Renders a document member by member, each value in a mode chosen by its
 * key. */
typedef shape_mode (*mode_for_key)(const char *key, const bson_iter_t *value);

static void render_members(jw *w, const char *key, const bson_iter_t *it, mode_for_key pick,
                           int depth)
{
	bson_iter_t c;
	w_open(w, key, '{');
	if (wire_iter_recurse(it, &c))
		while (wire_iter_next(&c)) {
			const char *k = wire_iter_key(&c);
			render(w, k, &c, pick(k, &c), depth + 1);
		}
	w_close(w);
}

static void render_elements(jw *w, const char *key, const bson_iter_t *it, shape_mode mode,
                            int depth)
{
	bson_iter_t c;
	w_open(w, key, '[');
	if (wire_iter_recurse(it, &c))
		while (wire_iter_next(&c))
			render(w, NULL, &c, mode, depth + 1);
	w_close(w);
}

/* Members of an operator document among literals ({$each, $slice, $sort}
 * of $push, {$geometry} ...): a sort specification is structure. */
static shape_mode pick_data(const char *k, const bson_iter_t *v)
{
	return strcmp(k, "$sort") == 0 ? SHAPE_VERBATIM : SHAPE_DATA;
}

/* A literal. Documents led by an operator keep their keys ($each, $slice,
 * $geometry ...); other documents and arrays collapse to one placeholder. */
static void render_data(jw *w, const char *key, const bson_iter_t *it, int depth)
{
	if (!w->redact) {
		render_verbatim(w, key, it, depth);
		return;
	}
	if (WIRE_ITER_HOLDS_ARRAY(it)) {
		w_array_placeholder(w, key, it);
		return;
	}
	if (first_key_is_operator(it)) {
		render_members(w, key, it, pick_data, depth);
		return;
	}
	w_placeholder(w, key, it);
}

static bool is_logical(const char *k)
{
	return strcmp(k, "$and") == 0 || strcmp(k, "$or") == 0 || strcmp(k, "$nor") == 0;
}

static shape_mode pick_filter(const char *k, const bson_iter_t *v);

/* The member of a field predicate: {$gt: 5} or {$elemMatch: {...}}. */
static shape_mode pick_pred_op(const char *k, const bson_iter_t *v)
{
	if (strcmp(k, "$elemMatch") == 0) {
		/* Document form ({a: 1, b: {$gt: 2}}) is a filter on the
		 * elements; value form ({$gt: 2}) applies to them. */
		bson_iter_t c;
		if (WIRE_ITER_HOLDS_DOCUMENT(v) && wire_iter_recurse(v, &c) && wire_iter_next(&c)) {
			const char *f = wire_iter_key(&c);
			if (f[0] != '$' || is_logical(f) || strcmp(f, "$expr") == 0 ||
			    strcmp(f, "$where") == 0)
				return SHAPE_FILTER;
		}
		/* value form: operators kept, operands replaced */
		return first_key_is_operator(v) ? SHAPE_PREDICATE : SHAPE_DATA;
	}
	if (strcmp(k, "$not") == 0) /* {$not: {$gt: ..}}, or {$not: /x/i} keeping its flags */
		return first_key_is_operator(v) ? SHAPE_PREDICATE : SHAPE_DATA;
	if (strcmp(k, "$options") == 0 || strcmp(k, "$exists") == 0 || strcmp(k, "$type") == 0)
		return SHAPE_VERBATIM; /* flags and types, not application data */
	return SHAPE_DATA;
}

static shape_mode pick_filter(const char *k, const bson_iter_t *v)
{
	if (k[0] != '$')
		return first_key_is_operator(v) ? SHAPE_PREDICATE : SHAPE_DATA;
	if (is_logical(k))
		return SHAPE_FILTER_LIST;
	if (strcmp(k, "$expr") == 0)
		return SHAPE_EXPR;
	return SHAPE_DATA;
}

static shape_mode pick_expr(const char *k, const bson_iter_t *v);

static bool is_regex_expr(const char *k)
{
	return strcmp(k, "$regexMatch") == 0 || strcmp(k, "$regexFind") == 0 ||
	       strcmp(k, "$regexFindAll") == 0;
}

static shape_mode pick_regex_expr(const char *k, const bson_iter_t *v)
{
	if (strcmp(k, "options") == 0)
		return SHAPE_VERBATIM;
	if (strcmp(k, "regex") == 0)
		return SHAPE_DATA;
	return SHAPE_EXPR;
}

static shape_mode pick_expr(const char *k, const bson_iter_t *v)
{
	if (strcmp(k, "$literal") == 0)
		return SHAPE_DATA;
	return SHAPE_EXPR;
}

/* An array inside an expression is either operands (["$a", 1]) or a
 * literal list (["x", "y", "z"]); a field path among the elements, or a
 * nested document or array, says operands. */
static bool array_is_literal_list(const bson_iter_t *it)
{
	bson_iter_t c;
	if (!wire_iter_recurse(it, &c))
		return true;
	while (wire_iter_next(&c)) {
		if (WIRE_ITER_HOLDS_DOCUMENT(&c) || WIRE_ITER_HOLDS_ARRAY(&c))
			return false;
		if (WIRE_ITER_HOLDS_UTF8(&c) && bson_iter_utf8(&c, NULL)[0] == '$')
			return false;
	}
	return true;
}

/* An aggregation expression: field paths and operators are the shape,
 * literal operands are data and get placeholders. */
static void render_expr(jw *w, const char *key, const bson_iter_t *it, int depth)
{
	if (WIRE_ITER_HOLDS_UTF8(it)) {
		uint32_t len;
		const char *s = bson_iter_utf8(it, &len);
		if (s[0] == '$') { /* field path or $$variable */
			w_str(w, key, s, len);
			return;
		}
		render_data(w, key, it, depth);
		return;
	}
	if (WIRE_ITER_HOLDS_ARRAY(it)) {
		if (array_is_literal_list(it))
			render_data(w, key, it, depth);
		else
			render_elements(w, key, it, SHAPE_EXPR, depth);
		return;
	}
	if (WIRE_ITER_HOLDS_DOCUMENT(it)) {
		bson_iter_t c;
		w_open(w, key, '{');
		if (wire_iter_recurse(it, &c))
			while (wire_iter_next(&c)) {
				const char *k = wire_iter_key(&c);
				if (is_regex_expr(k) && WIRE_ITER_HOLDS_DOCUMENT(&c))
					render_members(w, k, &c, pick_regex_expr, depth + 1);
				else
					render(w, k, &c, pick_expr(k, &c), depth + 1);
			}
		w_close(w);
		return;
	}
	render_data(w, key, it, depth);
}

static bool key_in(const char *k, const char *const *list)
{
	for (; *list; list++)
		if (strcmp(k, *list) == 0)
			return true;
	return false;
}

static shape_mode pick_lookup(const char *k, const bson_iter_t *v)
{
	static const char *const names[] = {"from", "localField", "foreignField", "as", NULL};
	if (key_in(k, names))
		return SHAPE_VERBATIM;
	if (strcmp(k, "let") == 0)
		return SHAPE_EXPR;
	if (strcmp(k, "pipeline") == 0)
		return SHAPE_PIPELINE;
	return SHAPE_DATA;
}

static shape_mode pick_graph_lookup(const char *k, const bson_iter_t *v)
{
	static const char *const names[] = {"from", "connectFromField", "connectToField",
	                                    "as",   "depthField",       NULL};
	if (key_in(k, names))
		return SHAPE_VERBATIM;
	if (strcmp(k, "startWith") == 0)
		return SHAPE_EXPR;
	if (strcmp(k, "restrictSearchWithMatch") == 0)
		return SHAPE_FILTER;
	return SHAPE_DATA;
}

static shape_mode pick_union_with(const char *k, const bson_iter_t *v)
{
	if (strcmp(k, "coll") == 0)
		return SHAPE_VERBATIM;
	if (strcmp(k, "pipeline") == 0)
		return SHAPE_PIPELINE;
	return SHAPE_DATA;
}

static shape_mode pick_facet(const char *k, const bson_iter_t *v)
{
	return SHAPE_PIPELINE;
}

static shape_mode pick_geo_near(const char *k, const bson_iter_t *v)
{
	static const char *const names[] = {"distanceField", "includeLocs", "key", "spherical",
	                                    NULL};
	if (key_in(k, names))
		return SHAPE_VERBATIM;
	if (strcmp(k, "query") == 0)
		return SHAPE_FILTER;
	return SHAPE_DATA;
}

static shape_mode pick_merge(const char *k, const bson_iter_t *v)
{
	if (strcmp(k, "let") == 0)
		return SHAPE_EXPR;
	if (strcmp(k, "whenMatched") == 0 && WIRE_ITER_HOLDS_ARRAY(v))
		return SHAPE_PIPELINE;
	return SHAPE_VERBATIM; /* into, on, whenMatched/whenNotMatched actions */
}

/* $project: 1/0/true/false say include or exclude, which is structure. */
static shape_mode pick_project(const char *k, const bson_iter_t *v)
{
	if (WIRE_ITER_HOLDS_BOOL(v) || WIRE_ITER_HOLDS_NUMBER(v))
		return SHAPE_VERBATIM;
	return SHAPE_EXPR;
}

/* One pipeline stage, in the mode its name calls for ($match as a
 * filter, stages whose arguments are names verbatim, the rest as
 * expressions), so a pipeline's shape keeps what decides its plan. */
static void render_stage(jw *w, const bson_iter_t *stage, int depth)
{
	bson_iter_t c;
	w_open(w, NULL, '{');
	if (wire_iter_recurse(stage, &c))
		while (wire_iter_next(&c)) {
			const char *k = wire_iter_key(&c);
			bool doc = WIRE_ITER_HOLDS_DOCUMENT(&c);
			mode_for_key pick = NULL;
			shape_mode mode = SHAPE_EXPR;
			if (strcmp(k, "$match") == 0)
				mode = SHAPE_FILTER;
			else if (strcmp(k, "$sort") == 0 || strcmp(k, "$count") == 0 ||
			         strcmp(k, "$out") == 0 || strcmp(k, "$unset") == 0 ||
			         strcmp(k, "$unwind") == 0 || strcmp(k, "$unionWith") == 0)
				mode = SHAPE_VERBATIM;
			else if (strcmp(k, "$limit") == 0 || strcmp(k, "$skip") == 0 ||
			         strcmp(k, "$sample") == 0)
				mode = SHAPE_DATA;
			else if (strcmp(k, "$merge") == 0)
				mode = SHAPE_VERBATIM;
			if (doc) {
				if (strcmp(k, "$lookup") == 0)
					pick = pick_lookup;
				else if (strcmp(k, "$graphLookup") == 0)
					pick = pick_graph_lookup;
				else if (strcmp(k, "$unionWith") == 0)
					pick = pick_union_with;
				else if (strcmp(k, "$facet") == 0)
					pick = pick_facet;
				else if (strcmp(k, "$geoNear") == 0)
					pick = pick_geo_near;
				else if (strcmp(k, "$merge") == 0)
					pick = pick_merge;
				else if (strcmp(k, "$project") == 0)
					pick = pick_project;
			}
			if (pick)
				render_members(w, k, &c, pick, depth + 1);
			else
				render(w, k, &c, mode, depth + 1);
		}
	w_close(w);
}

static shape_mode pick_update_op(const char *k, const bson_iter_t *v)
{
	return SHAPE_DATA;
}

static void render_update(jw *w, const char *key, const bson_iter_t *it, int depth)
{
	if (WIRE_ITER_HOLDS_ARRAY(it)) {
		render(w, key, it, SHAPE_PIPELINE, depth);
		return;
	}
	if (!WIRE_ITER_HOLDS_DOCUMENT(it)) {
		render_data(w, key, it, depth);
		return;
	}
	/* {$set: {a: 1}}: operators and field names kept, values replaced.
	 * A replacement document keeps its top-level field names. */
	bson_iter_t c;
	w_open(w, key, '{');
	if (wire_iter_recurse(it, &c))
		while (wire_iter_next(&c)) {
			const char *k = wire_iter_key(&c);
			if (k[0] == '$' && WIRE_ITER_HOLDS_DOCUMENT(&c))
				render_members(w, k, &c, pick_update_op, depth + 1);
			else
				render_data(w, k, &c, depth + 1);
		}
	w_close(w);
}

/* The one dispatch over render modes. It writes nothing once the buffer
 * is full and a placeholder past SHAPE_MAX_DEPTH, so a shape stays
 * bounded whatever the client sends. */
static void render(jw *w, const char *key, const bson_iter_t *it, shape_mode mode, int depth)
{
	if (w->full)
		return; /* nothing more will be written */
	if (depth >= SHAPE_MAX_DEPTH) {
		w_cstr(w, key, "?deep");
		return;
	}
	switch (mode) {
	case SHAPE_VERBATIM:
		render_verbatim(w, key, it, depth);
		return;
	case SHAPE_DATA:
		render_data(w, key, it, depth);
		return;
	case SHAPE_FILTER:
		if (WIRE_ITER_HOLDS_DOCUMENT(it))
			render_members(w, key, it, pick_filter, depth);
		else
			render_data(w, key, it, depth);
		return;
	case SHAPE_FILTER_LIST:
		if (WIRE_ITER_HOLDS_ARRAY(it))
			render_elements(w, key, it, SHAPE_FILTER, depth);
		else
			render_data(w, key, it, depth);
		return;
	case SHAPE_EXPR:
		render_expr(w, key, it, depth);
		return;
	case SHAPE_PIPELINE:
		if (WIRE_ITER_HOLDS_ARRAY(it)) {
			bson_iter_t c;
			w_open(w, key, '[');
			if (wire_iter_recurse(it, &c))
				while (wire_iter_next(&c)) {
					if (WIRE_ITER_HOLDS_DOCUMENT(&c))
						render_stage(w, &c, depth + 1);
					else
						render_data(w, NULL, &c, depth + 1);
				}
			w_close(w);
		} else {
			render_data(w, key, it, depth);
		}
		return;
	case SHAPE_UPDATE:
		render_update(w, key, it, depth);
		return;
	default: /* SHAPE_PREDICATE */
		render_members(w, key, it, pick_pred_op, depth);
		return;
	}
}

size_t shape_render(const shape_spec *s, bool redact, char *buf, size_t cap)
{
	return shape_render_values(s, redact, buf, cap, NULL);
}

size_t shape_render_values(const shape_spec *s, bool redact, char *buf, size_t cap, bool *values)
{
	jw w;
	jw_init(&w, buf, cap, redact);
	w_open(&w, NULL, '{');
	if (s->explain)
		w_open(&w, "explain", '{');
	if (s->target)
		w_cstr(&w, s->command, s->target);
	else
		w_raw(&w, s->command, "1", 1);
	for (size_t i = 0; i < s->nparts; i++) {
		const shape_part *p = &s->parts[i];
		if (p->str)
			w_cstr(&w, p->key, p->str);
		else {
			bson_iter_t it;
			wire_cur_iter(&p->value, &it);
			render(&w, p->key, &it, p->mode, 2);
		}
	}
	size_t n = jw_finish(&w);
	if (values)
		*values = w.values;
	return n;
}

size_t shape_render_value(const bson_iter_t *value, shape_mode mode, bool redact, char *buf,
                          size_t cap)
{
	jw w;
	jw_init(&w, buf, cap, redact);
	render(&w, NULL, value, mode, 0);
	return jw_finish(&w);
}

#define FNV_OFFSET 14695981039346656037ull
#define FNV_PRIME  1099511628211ull

static uint64_t fnv(uint64_t h, const char *s, bool with_nul)
{
	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= FNV_PRIME;
	}
	if (with_nul)
		h *= FNV_PRIME; /* h ^= 0 is a no-op */
	return h;
}

uint64_t shape_hash(const char *ns, const char *command, const char *shape)
{
	uint64_t h = FNV_OFFSET;
	h = fnv(h, ns ? ns : "", true);
	h = fnv(h, command ? command : "", true);
	return fnv(h, shape ? shape : "", false);
}

void shape_hash_hex(uint64_t h, char out[17])
{
	snprintf(out, 17, "%016llx", (unsigned long long)h);
}
