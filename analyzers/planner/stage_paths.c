/* What pipeline stages change of a document, for a $match after them
 * (stage_paths.h). */
#include "analyzers/planner/stage_paths.h"

#include <string.h>

#include "analyzers/planner/paths.h"
#include "protocol/wire_iter.h"

static bool streq(const char *a, const char *b)
{
	return strcmp(a, b) == 0;
}

static bool add_path(stage_paths *ch, const char *p)
{
	if (ch->n == STAGE_PATHS_MAX)
		return false;
	ch->path[ch->n++] = p;
	return true;
}

/* A $project value that keeps or drops a field: a number or a boolean. */
static bool flag_value(const bson_iter_t *v, bool *on)
{
	bson_type_t t = wire_iter_type(v);
	if (t == BSON_TYPE_BOOL)
		*on = bson_iter_bool(v);
	else if (WIRE_ITER_HOLDS_NUMBER(v))
		*on = bson_iter_as_int64(v) != 0 || bson_iter_as_double(v) != 0.0;
	else
		return false;
	return true;
}

/* {$project: {...}}: an exclusion (every value but _id's a 0 or false)
 * removes its fields; an inclusion keeps its 1/true fields (and _id
 * unless it says 0) and computes the others. A nested specification
 * ({a: {b: 1}}) is taken as computing its field. False: too many. */
static bool read_project(stage_paths *ch, const bson_iter_t *spec)
{
	bson_iter_t it;
	bool exclusion = true, any = false, on;
	if (!wire_iter_recurse(spec, &it))
		return false;
	while (wire_iter_next(&it)) {
		const char *k = wire_iter_key(&it);
		if (streq(k, "_id"))
			continue;
		any = true;
		if (!flag_value(&it, &on) || on)
			exclusion = false;
	}
	if (!any) /* {_id: 0} alone, or {}: an exclusion of _id at most */
		exclusion = true;
	if (!exclusion && ch->nkeeps == STAGE_PATHS_KEEPS)
		return false;
	unsigned kp = ch->nkeeps;
	if (!exclusion) {
		ch->keeps[kp].n = 0;
		ch->keeps[kp].id = true;
		ch->nkeeps++;
	}
	if (!wire_iter_recurse(spec, &it))
		return false;
	while (wire_iter_next(&it)) {
		const char *k = wire_iter_key(&it);
		bool flag = flag_value(&it, &on);
		if (streq(k, "_id") && flag) {
			if (exclusion && !on && !add_path(ch, k))
				return false;
			if (!exclusion)
				ch->keeps[kp].id = on;
		} else if (exclusion) {
			if (!add_path(ch, k))
				return false;
		} else if (flag && on) {
			if (ch->keeps[kp].n == STAGE_PATHS_MAX)
				return false;
			ch->keeps[kp].path[ch->keeps[kp].n++] = k;
		} else if (!add_path(ch, k)) { /* computed (or 0 beside 1s: refused) */
			return false;
		}
	}
	return true;
}

/* The paths $unwind changes: the one it unwinds and its includeArrayIndex
 * ({$unwind: "$a"} or {$unwind: {path: "$a", includeArrayIndex: "i"}}). */
static bool read_unwind(stage_paths *ch, const bson_iter_t *v)
{
	bson_iter_t it;
	if (WIRE_ITER_HOLDS_UTF8(v)) {
		const char *p = bson_iter_utf8(v, NULL);
		return p[0] == '$' && add_path(ch, p + 1);
	}
	if (!WIRE_ITER_HOLDS_DOCUMENT(v) || !wire_iter_recurse(v, &it))
		return false;
	bool path = false;
	while (wire_iter_next(&it)) {
		const char *k = wire_iter_key(&it);
		if (!WIRE_ITER_HOLDS_UTF8(&it))
			continue;
		const char *p = bson_iter_utf8(&it, NULL);
		if (streq(k, "path") && p[0] == '$') {
			if (!add_path(ch, p + 1))
				return false;
			path = true;
		} else if (streq(k, "includeArrayIndex") && !add_path(ch, p)) {
			return false;
		}
	}
	return path;
}

bool stage_paths_add(stage_paths *ch, const char *k, const bson_iter_t *v)
{
	bson_iter_t it;
	if (streq(k, "$match") || streq(k, "$sort"))
		return true; /* coalesces; changes nothing */
	ch->any = true;
	if (streq(k, "$unwind"))
		return read_unwind(ch, v);
	if (streq(k, "$lookup")) {
		if (!WIRE_ITER_HOLDS_DOCUMENT(v) || !wire_iter_recurse(v, &it) ||
		    !bson_iter_find(&it, "as") || !WIRE_ITER_HOLDS_UTF8(&it))
			return false;
		return add_path(ch, bson_iter_utf8(&it, NULL));
	}
	if (streq(k, "$addFields") || streq(k, "$set")) {
		if (!WIRE_ITER_HOLDS_DOCUMENT(v) || !wire_iter_recurse(v, &it))
			return false;
		while (wire_iter_next(&it))
			if (!add_path(ch, wire_iter_key(&it)))
				return false;
		return true;
	}
	if (streq(k, "$unset")) {
		if (WIRE_ITER_HOLDS_UTF8(v))
			return add_path(ch, bson_iter_utf8(v, NULL));
		if (!WIRE_ITER_HOLDS_ARRAY(v) || !wire_iter_recurse(v, &it))
			return false;
		while (wire_iter_next(&it))
			if (!WIRE_ITER_HOLDS_UTF8(&it) || !add_path(ch, bson_iter_utf8(&it, NULL)))
				return false;
		return true;
	}
	return streq(k, "$project") && WIRE_ITER_HOLDS_DOCUMENT(v) && read_project(ch, v);
}

bool stage_paths_pass(const stage_paths *ch, const char *f)
{
	if (!f)
		return !ch->any;
	for (unsigned i = 0; i < ch->n; i++)
		if (paths_overlap(f, ch->path[i]))
			return false;
	for (unsigned s = 0; s < ch->nkeeps; s++) {
		bool kept = ch->keeps[s].id && path_at_or_under(f, "_id", 3);
		for (unsigned i = 0; !kept && i < ch->keeps[s].n; i++) {
			const char *k = ch->keeps[s].path[i];
			kept = path_at_or_under(f, k, strlen(k));
		}
		if (!kept)
			return false;
	}
	return true;
}
