/* The redaction (capture.h): a copy of a command body, or of one document
 * of a kind-1 sequence, that keeps what the analyzers read and nothing else
 * that could be application data.
 *
 * It walks the body in modes, like the shape renderer in analyzers/engine/shape.c
 * (which this module may not depend on): a command's own options are kept,
 * a filter keeps field names and operators, an expression keeps field
 * paths, a pipeline keeps each stage's structural arguments, and every
 * literal becomes a placeholder of its own BSON type (so "is this
 * collatable", "how long is this $in", "is this a regex with the i flag"
 * still have their live answers). */
#include <string.h>

#include "protocol/capture.h"
#include "protocol/commands.h"

#define MAX_DEPTH 100 /* deeper values are replaced whole (never expected) */

typedef enum {
	RM_COMMAND,  /* a command body, or one statement of updates/deletes/ops */
	RM_FILTER,   /* a match expression */
	RM_EXPR,     /* an aggregation expression */
	RM_PIPELINE, /* an array of stages */
	RM_UPDATE,   /* update operators, a replacement, or a pipeline */
	RM_PROJECT,  /* a $project stage: inclusion flags kept, expressions as such */
	RM_DATA,     /* literals: keys kept, values replaced */
	RM_VERBATIM, /* not application data */
} rmode;

static void redact_value(bson_t *out, const char *key, size_t klen, const bson_iter_t *it,
                         rmode mode, int depth);

static bool streq(const char *a, const char *b)
{
	return strcmp(a, b) == 0;
}

/* A regex pattern keeps only what the case-insensitive-regex rule reads:
 * an anchor and a leading inline flag group ("^(?i)", "(?im:"). */
static void redacted_pattern(const char *p, char *out, size_t cap)
{
	size_t n = 0;
	if (p[0] == '^')
		n = 1;
	if (p[n] == '(' && p[n + 1] == '?') {
		size_t m = n + 2;
		while ((p[m] >= 'a' && p[m] <= 'z') || p[m] == '-')
			m++;
		if (p[m] == ')' || p[m] == ':')
			n = m + 1;
	}
	if (n >= cap)
		n = 0;
	memcpy(out, p, n);
	out[n] = '\0';
}

/* A literal: a placeholder of the same type. Booleans, null, minKey and
 * maxKey carry no data worth hiding and stay. */
static void placeholder(bson_t *out, const char *key, size_t klen, const bson_iter_t *it)
{
	int kl = (int)klen;
	switch (bson_iter_type(it)) {
	case BSON_TYPE_UTF8:
		bson_append_utf8(out, key, kl, "?", 1);
		break;
	case BSON_TYPE_INT32:
		bson_append_int32(out, key, kl, 0);
		break;
	case BSON_TYPE_INT64:
		bson_append_int64(out, key, kl, 0);
		break;
	case BSON_TYPE_DOUBLE:
		bson_append_double(out, key, kl, 0.0);
		break;
	case BSON_TYPE_DECIMAL128: {
		bson_decimal128_t d;
		bson_decimal128_from_string("0", &d);
		bson_append_decimal128(out, key, kl, &d);
		break;
	}
	case BSON_TYPE_DATE_TIME:
		bson_append_date_time(out, key, kl, 0);
		break;
	case BSON_TYPE_TIMESTAMP:
		bson_append_timestamp(out, key, kl, 0, 0);
		break;
	case BSON_TYPE_OID: {
		bson_oid_t o;
		memset(&o, 0, sizeof o);
		bson_append_oid(out, key, kl, &o);
		break;
	}
	case BSON_TYPE_BINARY: {
		bson_subtype_t st;
		uint32_t n;
		const uint8_t *b;
		static const uint8_t zeros[16];
		bson_iter_binary(it, &st, &n, &b);
		/* UUID subtypes must be 16 bytes long to be valid BSON */
		bool uuid = st == BSON_SUBTYPE_UUID || st == BSON_SUBTYPE_UUID_DEPRECATED;
		bson_append_binary(out, key, kl, st, zeros, uuid ? 16 : 0);
		break;
	}
	case BSON_TYPE_REGEX: {
		const char *opts;
		const char *pat = bson_iter_regex(it, &opts);
		char kept[64];
		redacted_pattern(pat, kept, sizeof kept);
		bson_append_regex(out, key, kl, kept, opts);
		break;
	}
	case BSON_TYPE_CODE:
	case BSON_TYPE_CODEWSCOPE:
		bson_append_code(out, key, kl, "");
		break;
	case BSON_TYPE_SYMBOL:
		bson_append_symbol(out, key, kl, "?", 1);
		break;
	case BSON_TYPE_DBPOINTER:
	case BSON_TYPE_UNDEFINED:
		bson_append_null(out, key, kl);
		break;
	default: /* bool, null, minKey, maxKey */
		bson_append_iter(out, key, kl, it);
		break;
	}
}

/* A document or array, each member in the mode child() gives it. */
typedef rmode (*child_fn)(const char *parent, const char *key, rmode mode);

static void redact_container(bson_t *out, const char *key, size_t klen, const bson_iter_t *it,
                             rmode mode, const char *parent, child_fn child, int depth)
{
	bson_t sub;
	bson_iter_t c;
	bool array = BSON_ITER_HOLDS_ARRAY(it);
	if (array)
		bson_append_array_begin(out, key, (int)klen, &sub);
	else
		bson_append_document_begin(out, key, (int)klen, &sub);
	if (bson_iter_recurse(it, &c))
		while (bson_iter_next(&c)) {
			const char *k = bson_iter_key(&c);
			redact_value(&sub, k, bson_iter_key_len(&c), &c,
			             child(parent, array ? NULL : k, mode), depth + 1);
		}
	if (array)
		bson_append_array_end(out, &sub);
	else
		bson_append_document_end(out, &sub);
}

/* ---- which mode each member gets ---- */

/* Members of a command body (or statement). What a command's filter,
 * update and statements are called is the command table's (cmd_key_role_of);
 * the options below are every command's. */
static rmode command_child(const char *parent, const char *k, rmode mode)
{
	static const char *const verbatim[] = {
	    "sort",        "hint",   "collation",       "cursor",
	    "readConcern", "nsInfo", "$readPreference", "writeConcern",
	    NULL};
	if (!k)
		return RM_COMMAND; /* an element of updates / deletes / ops */
	switch (cmd_key_role_of(k)) {
	case CMD_KEY_FILTER:
		return RM_FILTER;
	case CMD_KEY_UPDATE:
		return RM_UPDATE;
	case CMD_KEY_STATEMENTS:
		return RM_COMMAND;
	case CMD_KEY_DOCUMENTS: /* application data */
	case CMD_KEY_OTHER:
		break;
	}
	for (const char *const *v = verbatim; *v; v++)
		if (streq(k, *v))
			return RM_VERBATIM;
	if (streq(k, "pipeline"))
		return RM_PIPELINE;
	if (streq(k, "projection") || streq(k, "fields"))
		return RM_PROJECT; /* until stop 46 kept whole, an $elemMatch's values too */
	if (streq(k, cmd_rows[CMD_EXPLAIN].name))
		return RM_COMMAND; /* {explain: {find: ...}} (a bool stays a bool) */
	if (streq(k, "arrayFilters"))
		return RM_FILTER;
	return RM_DATA; /* documents, let, comment, lsid, anything unknown */
}

static rmode filter_child(const char *parent, const char *k, rmode mode)
{
	if (!k) /* elements of $and / $or / $nor / $in / $all ... */
		return RM_FILTER;
	if (k[0] != '$')
		return RM_FILTER;
	if (streq(k, "$expr"))
		return RM_EXPR;
	if (streq(k, "$options") || streq(k, "$type") || streq(k, "$exists"))
		return RM_VERBATIM;
	return RM_FILTER;
}

static rmode expr_child(const char *parent, const char *k, rmode mode)
{
	if (k && streq(k, "$literal"))
		return RM_DATA;
	if (k && streq(k, "options") && parent &&
	    (streq(parent, "$regexMatch") || streq(parent, "$regexFind") ||
	     streq(parent, "$regexFindAll")))
		return RM_VERBATIM;
	return RM_EXPR;
}

static rmode data_child(const char *parent, const char *k, rmode mode)
{
	return mode;
}

/* A $project's or a find's projection's members: {f: 1}, {f: false},
 * {"a.b": 0}, {a: {b: 1}} are inclusion flags (structure: a number is
 * one, never a value to set, which takes $literal); {f: {$op: ...}} and
 * {f: "$path"} are expressions, {f: {$elemMatch: ...}} a filter. Until
 * stop 46 a $project's flags became placeholders (0), so the report read
 * an inclusion as an exclusion, and a find's projection was kept whole,
 * an $elemMatch's values with it. */
static rmode project_child(const char *parent, const char *k, rmode mode)
{
	if (!k || k[0] != '$')
		return RM_PROJECT;
	if (streq(k, "$elemMatch")) /* a find's projection: a filter */
		return RM_FILTER;
	if (streq(k, "$slice") || streq(k, "$meta")) /* counts, a meta name: not data */
		return RM_VERBATIM;
	return RM_EXPR;
}

/* The arguments of one stage: structural names kept, filters and
 * expressions in their modes. */
static rmode stage_child(const char *stage, const char *k, rmode mode)
{
	static const char *const names[] = {"from",
	                                    "localField",
	                                    "foreignField",
	                                    "as",
	                                    "connectFromField",
	                                    "connectToField",
	                                    "depthField",
	                                    "maxDepth",
	                                    "coll",
	                                    "distanceField",
	                                    "includeArrayIndex",
	                                    "path",
	                                    "preserveNullAndEmptyArrays",
	                                    "key",
	                                    "into",
	                                    "on",
	                                    NULL};
	if (!k)
		return RM_EXPR;
	if (streq(k, "pipeline"))
		return RM_PIPELINE;
	if (streq(k, "restrictSearchWithMatch") || streq(k, "query"))
		return RM_FILTER;
	if (streq(k, "near"))
		return RM_DATA;
	for (const char *const *n = names; *n; n++)
		if (streq(k, *n))
			return RM_VERBATIM;
	return RM_EXPR; /* let, startWith, ... */
}

static rmode facet_child(const char *parent, const char *k, rmode mode)
{
	return RM_PIPELINE;
}

/* One stage {$name: arg}. */
static void redact_stage(bson_t *out, const char *key, size_t klen, const bson_iter_t *it,
                         int depth)
{
	bson_t sub;
	bson_iter_t c;
	if (!BSON_ITER_HOLDS_DOCUMENT(it)) {
		placeholder(out, key, klen, it);
		return;
	}
	bson_append_document_begin(out, key, (int)klen, &sub);
	if (bson_iter_recurse(it, &c))
		while (bson_iter_next(&c)) {
			const char *s = bson_iter_key(&c);
			size_t sl = bson_iter_key_len(&c);
			if (streq(s, "$match"))
				redact_value(&sub, s, sl, &c, RM_FILTER, depth + 1);
			else if (streq(s, "$sort") || streq(s, "$limit") || streq(s, "$skip") ||
			         streq(s, "$count") || streq(s, "$out") || streq(s, "$sample") ||
			         streq(s, "$indexStats") || streq(s, "$collStats") ||
			         streq(s, "$unset")) /* $unset: field names */
				redact_value(&sub, s, sl, &c, RM_VERBATIM, depth + 1);
			else if (streq(s, "$project"))
				redact_value(&sub, s, sl, &c, RM_PROJECT, depth + 1);
			else if (streq(s, "$unwind") || streq(s, "$unionWith")) {
				if (BSON_ITER_HOLDS_UTF8(&c))
					bson_append_iter(&sub, s, (int)sl, &c);
				else if (BSON_ITER_HOLDS_DOCUMENT(&c))
					redact_container(&sub, s, sl, &c, RM_EXPR, s, stage_child,
					                 depth + 1);
				else
					placeholder(&sub, s, sl, &c);
			} else if (streq(s, "$facet") && BSON_ITER_HOLDS_DOCUMENT(&c))
				redact_container(&sub, s, sl, &c, RM_PIPELINE, s, facet_child,
				                 depth + 1);
			else if (streq(s, "$lookup") || streq(s, "$graphLookup") ||
			         streq(s, "$geoNear") || streq(s, "$merge")) {
				if (BSON_ITER_HOLDS_DOCUMENT(&c))
					redact_container(&sub, s, sl, &c, RM_EXPR, s, stage_child,
					                 depth + 1);
				else if (BSON_ITER_HOLDS_UTF8(&c))
					bson_append_iter(&sub, s, (int)sl, &c); /* $merge: "coll" */
				else
					placeholder(&sub, s, sl, &c);
			} else if (s[0] == '$' && !streq(s, "$search") &&
			           !streq(s, "$vectorSearch") && !streq(s, "$documents"))
				redact_value(&sub, s, sl, &c, RM_EXPR, depth + 1);
			else
				redact_value(&sub, s, sl, &c, RM_DATA, depth + 1);
		}
	bson_append_document_end(out, &sub);
}

/* An update: operators keep their target paths ({$push: {f: {$each, $slice}}}
 * keeps every key, values become placeholders); a pipeline is a pipeline. */
static void redact_update(bson_t *out, const char *key, size_t klen, const bson_iter_t *it,
                          int depth)
{
	if (BSON_ITER_HOLDS_ARRAY(it))
		redact_value(out, key, klen, it, RM_PIPELINE, depth);
	else
		redact_value(out, key, klen, it, RM_DATA, depth);
}

static void redact_string(bson_t *out, const char *key, size_t klen, const bson_iter_t *it,
                          rmode mode)
{
	uint32_t n;
	const char *s = bson_iter_utf8(it, &n);
	/* In an expression, "$path" and "$$var" are structure; "$" as a
	 * literal's first character is rare enough to accept. */
	if (mode == RM_EXPR && n > 1 && s[0] == '$')
		bson_append_iter(out, key, (int)klen, it);
	else
		placeholder(out, key, klen, it);
}

static void redact_value(bson_t *out, const char *key, size_t klen, const bson_iter_t *it,
                         rmode mode, int depth)
{
	bool container = BSON_ITER_HOLDS_DOCUMENT(it) || BSON_ITER_HOLDS_ARRAY(it);
	if (mode == RM_VERBATIM) {
		bson_append_iter(out, key, (int)klen, it);
		return;
	}
	if (container && depth >= MAX_DEPTH) {
		bson_append_null(out, key, (int)klen);
		return;
	}
	if (!container) {
		if (BSON_ITER_HOLDS_UTF8(it))
			redact_string(out, key, klen, it, mode == RM_PROJECT ? RM_EXPR : mode);
		else if ((mode == RM_COMMAND && !BSON_ITER_HOLDS_BINARY(it)) ||
		         (mode == RM_UPDATE && BSON_ITER_HOLDS_NUMBER(it)) ||
		         (mode == RM_PROJECT &&
		          (BSON_ITER_HOLDS_NUMBER(it) || BSON_ITER_HOLDS_BOOL(it))))
			/* limit, multi, ordered, ...; bulkWrite's {update: i} */
			bson_append_iter(out, key, (int)klen, it);
		else
			placeholder(out, key, klen, it);
		return;
	}
	switch (mode) {
	case RM_COMMAND:
		redact_container(out, key, klen, it, mode, key, command_child, depth);
		break;
	case RM_FILTER:
		redact_container(out, key, klen, it, mode, key, filter_child, depth);
		break;
	case RM_EXPR:
		redact_container(out, key, klen, it, mode, key, expr_child, depth);
		break;
	case RM_PIPELINE: {
		bson_t sub;
		bson_iter_t c;
		if (!BSON_ITER_HOLDS_ARRAY(it)) {
			redact_container(out, key, klen, it, RM_DATA, key, data_child, depth);
			break;
		}
		bson_append_array_begin(out, key, (int)klen, &sub);
		if (bson_iter_recurse(it, &c))
			while (bson_iter_next(&c))
				redact_stage(&sub, bson_iter_key(&c), bson_iter_key_len(&c), &c,
				             depth + 1);
		bson_append_array_end(out, &sub);
		break;
	}
	case RM_UPDATE:
		redact_update(out, key, klen, it, depth);
		break;
	case RM_PROJECT:
		redact_container(out, key, klen, it, BSON_ITER_HOLDS_ARRAY(it) ? RM_EXPR : mode,
		                 key, BSON_ITER_HOLDS_ARRAY(it) ? expr_child : project_child,
		                 depth);
		break;
	default:
		redact_container(out, key, klen, it, RM_DATA, key, data_child, depth);
		break;
	}
}

/* The body's first member is the command and its target (a collection
 * name, or 1): kept. Strings among the other top-level members are kept
 * only where they are names ($db, distinct's key, a getMore's
 * collection). An explained command is redacted as a command of its own
 * (its collection kept). Until stop 46 a getMore's collection and an
 * explained command's became "?", and the report lost which cursor a
 * getMore continued and which collection an explain read. */
void capture_redact_command(const bson_t *body, bson_t *out)
{
	bson_iter_t it;
	bool first = true;
	bson_init(out);
	if (!bson_iter_init(&it, body))
		return;
	while (bson_iter_next(&it)) {
		const char *k = bson_iter_key(&it);
		size_t kl = bson_iter_key_len(&it);
		const uint8_t *d;
		uint32_t dl;
		bson_t inner, kept;
		if (first && !BSON_ITER_HOLDS_DOCUMENT(&it))
			bson_append_iter(out, k, (int)kl, &it);
		else if (BSON_ITER_HOLDS_UTF8(&it) &&
		         (streq(k, "$db") || streq(k, "key") || streq(k, "collection")))
			bson_append_iter(out, k, (int)kl, &it);
		else if (first &&
		         (bson_iter_document(&it, &dl, &d), bson_init_static(&inner, d, dl))) {
			capture_redact_command(&inner, &kept); /* {explain: {find: ...}} */
			bson_append_document(out, k, (int)kl, &kept);
			bson_destroy(&kept);
		} else if (first)
			redact_value(out, k, kl, &it, RM_COMMAND, 1);
		else
			redact_value(out, k, kl, &it, command_child(NULL, k, RM_COMMAND), 1);
		first = false;
	}
}

/* One statement of updates / deletes / ops (or an nsInfo entry, kept
 * whole: namespaces, not data). */
void capture_redact_statement(const bson_t *doc, bool ns_info, bson_t *out)
{
	bson_iter_t di;
	bson_init(out);
	if (!bson_iter_init(&di, doc))
		return;
	while (bson_iter_next(&di)) {
		const char *k = bson_iter_key(&di);
		redact_value(out, k, bson_iter_key_len(&di), &di,
		             ns_info ? RM_VERBATIM : command_child(NULL, k, RM_COMMAND), 2);
	}
}

/* An index's listIndexes document: the schema's, kept, but for the values
 * of a partialFilterExpression, application data as a filter's are. */
void capture_redact_index_spec(const bson_t *spec, bson_t *out)
{
	bson_iter_t it;
	if (!bson_iter_init(&it, spec))
		return;
	while (bson_iter_next(&it)) {
		const char *k = bson_iter_key(&it);
		size_t kl = bson_iter_key_len(&it);
		if (streq(k, "partialFilterExpression"))
			redact_value(out, k, kl, &it, RM_FILTER, 1);
		else
			bson_append_iter(out, k, (int)kl, &it);
	}
}
