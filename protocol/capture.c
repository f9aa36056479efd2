/* The capture format (capture.h): building records, the redaction, reading.
 *
 * The redaction keeps what the analyzers read and nothing else that could
 * be application data. It walks the body in modes, like the shape renderer
 * in analyzers/shape.c (which this module may not depend on): a command's
 * own options are kept, a filter keeps field names and operators, an
 * expression keeps field paths, a pipeline keeps each stage's structural
 * arguments, and every literal becomes a placeholder of its own BSON type
 * (so "is this collatable", "how long is this $in", "is this a regex with
 * the i flag" still have their live answers). */
#include "protocol/capture.h"

#include <stdlib.h>
#include <string.h>

#include "protocol/frame.h"
#include "protocol/opmsg.h"

#define MAX_DEPTH 100 /* deeper values are replaced whole (never expected) */

typedef enum {
	RM_COMMAND,  /* a command body, or one statement of updates/deletes/ops */
	RM_FILTER,   /* a match expression */
	RM_EXPR,     /* an aggregation expression */
	RM_PIPELINE, /* an array of stages */
	RM_UPDATE,   /* update operators, a replacement, or a pipeline */
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

/* Members of a command body (or statement). */
static rmode command_child(const char *parent, const char *k, rmode mode)
{
	static const char *const filters[] = {"filter", "query", "q", NULL};
	static const char *const updates[] = {"update", "u", "updateMods", NULL};
	static const char *const verbatim[] = {
	    "sort",         "hint",        "collation", "projection",      "fields", "cursor",
	    "writeConcern", "readConcern", "nsInfo",    "$readPreference", NULL};
	static const char *const statements[] = {"updates", "deletes", "ops", NULL};
	if (!k)
		return RM_COMMAND; /* an element of updates / deletes / ops */
	for (const char *const *f = filters; *f; f++)
		if (streq(k, *f))
			return RM_FILTER;
	for (const char *const *u = updates; *u; u++)
		if (streq(k, *u))
			return RM_UPDATE;
	for (const char *const *v = verbatim; *v; v++)
		if (streq(k, *v))
			return RM_VERBATIM;
	for (const char *const *s = statements; *s; s++)
		if (streq(k, *s))
			return RM_COMMAND;
	if (streq(k, "pipeline"))
		return RM_PIPELINE;
	if (streq(k, "explain"))
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
			         streq(s, "$indexStats") || streq(s, "$collStats"))
				redact_value(&sub, s, sl, &c, RM_VERBATIM, depth + 1);
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
			redact_string(out, key, klen, it, mode);
		else if ((mode == RM_COMMAND && !BSON_ITER_HOLDS_BINARY(it)) ||
		         (mode == RM_UPDATE && BSON_ITER_HOLDS_NUMBER(it)))
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
	default:
		redact_container(out, key, klen, it, RM_DATA, key, data_child, depth);
		break;
	}
}

/* The body's first member is the command and its target (a collection
 * name, or 1): kept. Strings among the other top-level members are kept
 * only where they are names ($db, distinct's key, the hint). */
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
		if (first && !BSON_ITER_HOLDS_DOCUMENT(&it))
			bson_append_iter(out, k, (int)kl, &it);
		else if (BSON_ITER_HOLDS_UTF8(&it) && (streq(k, "$db") || streq(k, "key")))
			bson_append_iter(out, k, (int)kl, &it);
		else if (first) /* {explain: {...}} */
			redact_value(out, k, kl, &it, RM_COMMAND, 1);
		else
			redact_value(out, k, kl, &it, command_child(NULL, k, RM_COMMAND), 1);
		first = false;
	}
}

/* ---- records ---- */

void capture_build_header(bson_t *out, const char *mongoguard_version, const char *instance,
                          bool redact, int64_t start_us, const bson_t *rules)
{
	bson_init(out);
	BSON_APPEND_UTF8(out, "k", "header");
	BSON_APPEND_UTF8(out, "format", CAPTURE_FORMAT_NAME);
	BSON_APPEND_INT32(out, "v", CAPTURE_FORMAT_VERSION);
	BSON_APPEND_UTF8(out, "mongoguard", mongoguard_version);
	BSON_APPEND_UTF8(out, "instance", instance);
	BSON_APPEND_UTF8(out, "redaction", redact ? "shapes" : "none");
	BSON_APPEND_DATE_TIME(out, "start", start_us / 1000);
	BSON_APPEND_INT64(out, "startUs", start_us);
	if (rules)
		BSON_APPEND_DOCUMENT(out, "rules", rules);
}

static void append_origin(bson_t *out, const char *kind, const capture_origin *o)
{
	BSON_APPEND_UTF8(out, "k", kind);
	BSON_APPEND_INT64(out, "t", o->t_us);
	BSON_APPEND_INT64(out, "conn", (int64_t)o->conn);
	BSON_APPEND_UTF8(out, "client", o->client ? o->client : "");
	BSON_APPEND_UTF8(out, "app", o->app ? o->app : "");
}

/* The collection a command names first ("find": "orders"), if any. */
static const char *first_coll(const cmdview *v)
{
	bson_iter_t it;
	if (bson_iter_init(&it, &v->body) && bson_iter_next(&it) && BSON_ITER_HOLDS_UTF8(&it))
		return bson_iter_utf8(&it, NULL);
	return NULL;
}

/* Commands that carry a credential or a SASL conversation: the SCRAM
 * client-first and client-final messages, a PLAIN password, a user's new
 * `pwd`, speculative authentication inside a hello. They are stored
 * redacted even when redaction is off: redaction off is for seeing
 * application data, and no one reviewing a design needs a password. */
static bool holds_credentials(const cmdview *v)
{
	static const char *const names[] = {
	    "saslStart",  "saslContinue",    "authenticate", "createUser",
	    "updateUser", "copydbsaslstart", "copydb",       NULL,
	};
	for (int i = 0; v->name && names[i]; i++)
		if (streq(v->name, names[i]))
			return true;
	bson_iter_t it;
	if (!bson_iter_init(&it, &v->body))
		return true; /* unreadable: never stored whole */
	while (bson_iter_next(&it)) {
		const char *k = bson_iter_key(&it);
		if (streq(k, "pwd") || streq(k, "speculativeAuthenticate") || streq(k, "payload"))
			return true;
	}
	return false;
}

void capture_build_request(bson_t *out, const capture_origin *o, const request *r, bool redact,
                           const char *outcome)
{
	const cmdview *v = &r->view;
	const char *coll = first_coll(v);
	bson_init(out);
	append_origin(out, "req", o);
	BSON_APPEND_INT32(out, "rid", r->h.request_id);
	BSON_APPEND_UTF8(out, "op", v->name ? v->name : "");
	BSON_APPEND_UTF8(out, "db", v->db ? v->db : "");
	if (coll && v->db) {
		char ns[512];
		snprintf(ns, sizeof ns, "%s.%s", v->db, coll);
		BSON_APPEND_UTF8(out, "ns", ns);
	}
	BSON_APPEND_INT64(out, "len", (int64_t)r->len);
	BSON_APPEND_BOOL(out, "mtc", r->more_to_come);
	BSON_APPEND_UTF8(out, "verdict", outcome ? outcome : "forward");
	if (!redact && !holds_credentials(v)) {
		BSON_APPEND_BINARY(out, "msg", BSON_SUBTYPE_BINARY, r->msg, (uint32_t)r->len);
		return;
	}
	bson_t body, seqs;
	capture_redact_command(&v->body, &body);
	BSON_APPEND_DOCUMENT(out, "body", &body);
	bson_destroy(&body);
	if (!v->nseqs)
		return;
	bson_append_document_begin(out, "seqs", -1, &seqs);
	for (size_t i = 0; i < v->nseqs; i++) {
		const opmsg_sequence *s = &v->seqs[i];
		bool inserts = streq(s->id, "documents");
		bson_t arr;
		bson_append_array_begin(&seqs, s->id, -1, &arr);
		const uint8_t *p = s->docs, *end = s->docs + s->docs_len;
		uint32_t n = 0;
		while (end - p >= 5) {
			uint32_t dl = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
			              (uint32_t)p[3] << 24;
			bson_t doc, red;
			if (dl < 5 || dl > (size_t)(end - p) || !bson_init_static(&doc, p, dl))
				break;
			char key[16];
			const char *ks;
			size_t kl = bson_uint32_to_string(n++, &ks, key, sizeof key);
			if (inserts) {
				/* Inserted documents are data through and through:
				 * only their size is kept. */
				bson_t e = BSON_INITIALIZER;
				BSON_APPEND_INT32(&e, "$size", (int32_t)dl);
				bson_append_document(&arr, ks, (int)kl, &e);
				bson_destroy(&e);
			} else {
				bson_iter_t di;
				bson_init(&red);
				if (bson_iter_init(&di, &doc))
					while (bson_iter_next(&di))
						redact_value(&red, bson_iter_key(&di),
						             bson_iter_key_len(&di), &di,
						             streq(s->id, "nsInfo")
						                 ? RM_VERBATIM
						                 : command_child(NULL,
						                                 bson_iter_key(&di),
						                                 RM_COMMAND),
						             2);
				bson_append_document(&arr, ks, (int)kl, &red);
				bson_destroy(&red);
			}
			p += dl;
		}
		bson_append_array_end(&seqs, &arr);
	}
	bson_append_document_end(out, &seqs);
}

/* ---- replies ---- */

/* Longest array under each path of doc (dotted, arrays' elements not
 * descended into), merged into f->arrays' running maxima. */
typedef struct array_stat {
	char path[128];
	int64_t max;
} array_stat;

enum { MAX_ARRAY_PATHS = 32 };

typedef struct array_stats {
	array_stat a[MAX_ARRAY_PATHS];
	size_t n;
} array_stats;

static void note_array(array_stats *st, const char *path, int64_t len)
{
	for (size_t i = 0; i < st->n; i++)
		if (streq(st->a[i].path, path)) {
			if (len > st->a[i].max)
				st->a[i].max = len;
			return;
		}
	if (st->n < MAX_ARRAY_PATHS) {
		snprintf(st->a[st->n].path, sizeof st->a[st->n].path, "%s", path);
		st->a[st->n++].max = len;
	}
}

static void walk_arrays(array_stats *st, const bson_iter_t *it, const char *prefix, int depth)
{
	bson_iter_t c;
	if (depth > 4 || !bson_iter_recurse(it, &c))
		return;
	while (bson_iter_next(&c)) {
		char path[128];
		snprintf(path, sizeof path, "%s%s%s", prefix, *prefix ? "." : "",
		         bson_iter_key(&c));
		if (BSON_ITER_HOLDS_ARRAY(&c)) {
			bson_iter_t e;
			int64_t n = 0;
			if (bson_iter_recurse(&c, &e))
				while (bson_iter_next(&e))
					n++;
			note_array(st, path, n);
		} else if (BSON_ITER_HOLDS_DOCUMENT(&c)) {
			walk_arrays(st, &c, path, depth + 1);
		}
	}
}

/* The documents of a batch array (cursor.firstBatch / nextBatch). */
static void measure_batch(capture_reply_facts *f, const bson_iter_t *batch, bool sample,
                          array_stats *st)
{
	bson_iter_t d;
	f->n = 0;
	if (!bson_iter_recurse(batch, &d))
		return;
	while (bson_iter_next(&d)) {
		f->n++;
		if (!sample || !BSON_ITER_HOLDS_DOCUMENT(&d))
			continue;
		uint32_t dl;
		const uint8_t *data;
		bson_iter_document(&d, &dl, &data);
		f->docs_n++;
		f->docs_total += dl;
		if (dl > f->docs_max)
			f->docs_max = dl;
		walk_arrays(st, &d, "", 0);
	}
}

static void inspect_body(const bson_t *body, bool sample, capture_reply_facts *f, array_stats *st)
{
	bson_iter_t it, c;
	f->read = true;
	f->n = 1;
	if (bson_iter_init_find(&it, body, "ok"))
		f->ok = bson_iter_as_double(&it) == 1.0;
	if (bson_iter_init_find(&it, body, "code") && BSON_ITER_HOLDS_NUMBER(&it))
		f->code = (int32_t)bson_iter_as_int64(&it);
	if (bson_iter_init_find(&it, body, "cursor") && BSON_ITER_HOLDS_DOCUMENT(&it) &&
	    bson_iter_recurse(&it, &c)) {
		while (bson_iter_next(&c)) {
			const char *k = bson_iter_key(&c);
			if ((streq(k, "firstBatch") || streq(k, "nextBatch")) &&
			    BSON_ITER_HOLDS_ARRAY(&c))
				measure_batch(f, &c, sample, st);
			else if (streq(k, "id") && BSON_ITER_HOLDS_NUMBER(&c))
				f->cid = bson_iter_as_int64(&c);
		}
	} else if (bson_iter_init_find(&it, body, "n") && BSON_ITER_HOLDS_NUMBER(&it)) {
		f->n = bson_iter_as_int64(&it); /* writes: documents matched / inserted */
	}
	if (sample && !f->docs_n) {
		f->docs_n = 1;
		f->docs_total = f->docs_max = body->len;
	}
}

void capture_reply_inspect(const uint8_t *msg, size_t len, bool sample, capture_reply_facts *f)
{
	memset(f, 0, sizeof *f);
	bson_init(&f->arrays);
	array_stats st = {.n = 0};
	frame_header h;
	wire_error err;
	if (frame_header_parse(msg, len, &h, &err) != FRAME_OK || (size_t)h.length != len)
		return;
	bson_t body;
	if (h.opcode == OP_MSG) {
		opmsg m;
		if (!opmsg_parse(msg, len, &m, &err) ||
		    !bson_init_static(&body, m.body, m.body_len))
			return;
		inspect_body(&body, sample, f, &st);
	} else if (h.opcode == OP_REPLY && len >= WIRE_HEADER_LEN + 20 + 5) {
		const uint8_t *p = msg + WIRE_HEADER_LEN;
		int32_t nret = wire_read_i32(p + 12);
		const uint8_t *doc = p + 20;
		uint32_t dl = (uint32_t)wire_read_i32(doc);
		if (dl < 5 || dl > len - (WIRE_HEADER_LEN + 20) ||
		    !bson_init_static(&body, doc, dl))
			return;
		inspect_body(&body, sample, f, &st);
		f->n = nret;
	} else {
		return;
	}
	f->sampled = sample;
	for (size_t i = 0; i < st.n; i++)
		BSON_APPEND_INT64(&f->arrays, st.a[i].path, st.a[i].max);
}

void capture_reply_facts_free(capture_reply_facts *f)
{
	bson_destroy(&f->arrays);
}

void capture_build_reply(bson_t *out, const capture_origin *o, int32_t response_to, size_t len,
                         const capture_reply_facts *f)
{
	bson_init(out);
	BSON_APPEND_UTF8(out, "k", "reply");
	BSON_APPEND_INT64(out, "t", o->t_us);
	BSON_APPEND_INT64(out, "conn", (int64_t)o->conn);
	BSON_APPEND_INT32(out, "rt", response_to);
	BSON_APPEND_INT64(out, "len", (int64_t)len);
	if (!f || !f->read)
		return;
	BSON_APPEND_BOOL(out, "ok", f->ok);
	if (f->code)
		BSON_APPEND_INT32(out, "code", f->code);
	BSON_APPEND_INT64(out, "n", f->n);
	BSON_APPEND_INT64(out, "cid", f->cid);
	if (!f->sampled)
		return;
	bson_t d;
	bson_append_document_begin(out, "docs", -1, &d);
	BSON_APPEND_INT64(&d, "n", f->docs_n);
	BSON_APPEND_INT64(&d, "max", f->docs_max);
	BSON_APPEND_INT64(&d, "total", f->docs_total);
	bson_append_document_end(out, &d);
	if (!bson_empty(&f->arrays))
		BSON_APPEND_DOCUMENT(out, "arrays", &f->arrays);
}

void capture_build_indexes(bson_t *out, int64_t t_us, const char *ns, const bson_t *const *specs,
                           size_t n, const char *opaque)
{
	bson_init(out);
	BSON_APPEND_UTF8(out, "k", "indexes");
	BSON_APPEND_INT64(out, "t", t_us);
	BSON_APPEND_UTF8(out, "ns", ns);
	if (opaque) {
		BSON_APPEND_UTF8(out, "opaque", opaque);
		return;
	}
	bson_t arr;
	bson_append_array_begin(out, "indexes", -1, &arr);
	for (size_t i = 0; i < n; i++) {
		char key[16];
		const char *ks;
		size_t kl = bson_uint32_to_string((uint32_t)i, &ks, key, sizeof key);
		bson_append_document(&arr, ks, (int)kl, specs[i]);
	}
	bson_append_array_end(out, &arr);
}

void capture_build_gap(bson_t *out, int64_t t_us, uint64_t dropped, int64_t from_us, int64_t to_us)
{
	bson_init(out);
	BSON_APPEND_UTF8(out, "k", "gap");
	BSON_APPEND_INT64(out, "t", t_us);
	BSON_APPEND_INT64(out, "dropped", (int64_t)dropped);
	BSON_APPEND_INT64(out, "from", from_us);
	BSON_APPEND_INT64(out, "to", to_us);
}

/* ---- reading ---- */

capture_next_status capture_next(const uint8_t *buf, size_t len, size_t *off, bson_t *rec)
{
	size_t at = *off;
	if (at >= len)
		return CAPTURE_NEXT_END;
	if (len - at < 4)
		return CAPTURE_NEXT_TRUNCATED;
	uint32_t dl = (uint32_t)wire_read_i32(buf + at);
	if (dl < 5 || dl > 48000000)
		return CAPTURE_NEXT_INVALID;
	if (dl > len - at)
		return CAPTURE_NEXT_TRUNCATED;
	if (buf[at + dl - 1] != 0 || !bson_init_static(rec, buf + at, dl))
		return CAPTURE_NEXT_INVALID;
	*off = at + dl;
	return CAPTURE_NEXT_OK;
}

capture_rec_kind capture_kind(const bson_t *rec)
{
	bson_iter_t it;
	/* "k" is the first field of every record the writer makes. */
	if (!bson_iter_init(&it, rec) || !bson_iter_next(&it) || !streq(bson_iter_key(&it), "k") ||
	    !BSON_ITER_HOLDS_UTF8(&it))
		return CAPTURE_REC_UNKNOWN;
	const char *k = bson_iter_utf8(&it, NULL);
	if (streq(k, "req"))
		return CAPTURE_REC_REQUEST;
	if (streq(k, "reply"))
		return CAPTURE_REC_REPLY;
	if (streq(k, "indexes"))
		return CAPTURE_REC_INDEXES;
	if (streq(k, "gap"))
		return CAPTURE_REC_GAP;
	if (streq(k, "header"))
		return CAPTURE_REC_HEADER;
	return CAPTURE_REC_UNKNOWN;
}

bool capture_check_header(const bson_t *rec, char *err, size_t errlen)
{
	bson_iter_t it;
	if (capture_kind(rec) != CAPTURE_REC_HEADER || !bson_iter_init_find(&it, rec, "format") ||
	    !BSON_ITER_HOLDS_UTF8(&it) || !streq(bson_iter_utf8(&it, NULL), CAPTURE_FORMAT_NAME)) {
		snprintf(err, errlen, "not a mongoguard capture (no header record)");
		return false;
	}
	int64_t v = bson_iter_init_find(&it, rec, "v") && BSON_ITER_HOLDS_NUMBER(&it)
	                ? bson_iter_as_int64(&it)
	                : -1;
	if (v != CAPTURE_FORMAT_VERSION) {
		snprintf(err, errlen,
		         "capture format version %lld is not one this mongoguard reads (it reads "
		         "version %d); use the mongoguard version that wrote it",
		         (long long)v, CAPTURE_FORMAT_VERSION);
		return false;
	}
	return true;
}

/* An OP_MSG of body (with $db added if absent) and the sequences of seqs. */
static uint8_t *rebuild_opmsg(const bson_t *body, const char *db, const bson_t *seqs, size_t *len)
{
	bson_t b;
	bson_iter_t it;
	bson_copy_to(body, &b);
	if (!bson_iter_init_find(&it, body, "$db"))
		BSON_APPEND_UTF8(&b, "$db", db);
	size_t total = WIRE_HEADER_LEN + 4 + 1 + b.len;
	bson_iter_t s;
	if (seqs && bson_iter_init(&s, seqs))
		while (bson_iter_next(&s)) {
			uint32_t al;
			const uint8_t *ad;
			bson_iter_t e;
			total += 1 + 4 + bson_iter_key_len(&s) + 1;
			if (BSON_ITER_HOLDS_ARRAY(&s) && bson_iter_recurse(&s, &e))
				while (bson_iter_next(&e))
					if (BSON_ITER_HOLDS_DOCUMENT(&e)) {
						bson_iter_document(&e, &al, &ad);
						total += al;
					}
		}
	uint8_t *m = malloc(total);
	if (!m) {
		bson_destroy(&b);
		return NULL;
	}
	uint8_t *p = m;
	wire_write_i32(p, (int32_t)total);
	wire_write_i32(p + 4, 0);
	wire_write_i32(p + 8, 0);
	wire_write_i32(p + 12, OP_MSG);
	wire_write_i32(p + 16, 0);
	p += WIRE_HEADER_LEN + 4;
	*p++ = 0;
	memcpy(p, bson_get_data(&b), b.len);
	p += b.len;
	bson_destroy(&b);
	if (seqs && bson_iter_init(&s, seqs))
		while (bson_iter_next(&s)) {
			uint8_t *start = p;
			bson_iter_t e;
			*p++ = 1;
			p += 4;
			memcpy(p, bson_iter_key(&s), bson_iter_key_len(&s) + 1);
			p += bson_iter_key_len(&s) + 1;
			if (BSON_ITER_HOLDS_ARRAY(&s) && bson_iter_recurse(&s, &e))
				while (bson_iter_next(&e))
					if (BSON_ITER_HOLDS_DOCUMENT(&e)) {
						uint32_t al;
						const uint8_t *ad;
						bson_iter_document(&e, &al, &ad);
						memcpy(p, ad, al);
						p += al;
					}
			wire_write_i32(start + 1, (int32_t)(p - start - 1));
		}
	*len = total;
	return m;
}

uint8_t *capture_request_message(const bson_t *rec, size_t *len)
{
	bson_iter_t it;
	if (bson_iter_init_find(&it, rec, "msg") && BSON_ITER_HOLDS_BINARY(&it)) {
		bson_subtype_t st;
		uint32_t n;
		const uint8_t *b;
		bson_iter_binary(&it, &st, &n, &b);
		uint8_t *m = malloc(n ? n : 1);
		if (m)
			memcpy(m, b, n);
		*len = n;
		return m;
	}
	bson_t body, seqs;
	uint32_t bl;
	const uint8_t *bd;
	if (!bson_iter_init_find(&it, rec, "body") || !BSON_ITER_HOLDS_DOCUMENT(&it))
		return NULL;
	bson_iter_document(&it, &bl, &bd);
	if (!bson_init_static(&body, bd, bl))
		return NULL;
	const char *db = "";
	if (bson_iter_init_find(&it, rec, "db") && BSON_ITER_HOLDS_UTF8(&it))
		db = bson_iter_utf8(&it, NULL);
	bool has_seqs = false;
	if (bson_iter_init_find(&it, rec, "seqs") && BSON_ITER_HOLDS_DOCUMENT(&it)) {
		bson_iter_document(&it, &bl, &bd);
		has_seqs = bson_init_static(&seqs, bd, bl);
	}
	return rebuild_opmsg(&body, db, has_seqs ? &seqs : NULL, len);
}
