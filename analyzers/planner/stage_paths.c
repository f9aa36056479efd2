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

/* The field v renames, "$a" -> "a": one component of the current
 * document, not a variable; NULL for any other value. */
static const char *rename_source(const bson_iter_t *v)
{
	if (!WIRE_ITER_HOLDS_UTF8(v))
		return NULL;
	const char *s = bson_iter_utf8(v, NULL);
	if (s[0] != '$' || s[1] == '\0' || s[1] == '$' || strchr(s + 1, '.'))
		return NULL;
	return s + 1;
}

static bool add_rename(stage_paths *ch, const char *to, const char *from, bool under_id)
{
	if (ch->nrenames == STAGE_PATHS_RENAMES)
		return false;
	ch->rename[ch->nrenames++] = (stage_rename){to, from, under_id};
	return true;
}

/* A field assigned v: a rename when v is one and the field is not dotted
 * (a dotted one can reshape arrays), else a path it changes (unless the
 * stage keeps: then it is simply not kept). */
static bool assigned(stage_paths *ch, const char *k, const bson_iter_t *v, bool keeps)
{
	const char *from = rename_source(v);
	if (from && !strchr(k, '.'))
		return add_rename(ch, k, from, false);
	return keeps || add_path(ch, k);
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
 * unless it says 0 or computes it) and computes or renames the others. A
 * nested specification ({a: {b: 1}}) is taken as computing its field. */
static bool read_project(stage_paths *ch, stage_change *st, const bson_iter_t *spec)
{
	bson_iter_t it;
	bool exclusion = true, any = false, id_off = true, on;
	if (!wire_iter_recurse(spec, &it))
		return false;
	while (wire_iter_next(&it)) {
		if (streq(wire_iter_key(&it), "_id")) {
			id_off = flag_value(&it, &on) && !on;
			continue;
		}
		any = true;
		if (!flag_value(&it, &on) || on)
			exclusion = false;
	}
	if (!any) /* {}, {_id: 0}: an exclusion; {_id: 1}, {_id: "$a"}: _id alone */
		exclusion = id_off;
	st->keeps = !exclusion;
	st->id = true;
	if (!wire_iter_recurse(spec, &it))
		return false;
	while (wire_iter_next(&it)) {
		const char *k = wire_iter_key(&it);
		bool flag = flag_value(&it, &on);
		if (streq(k, "_id") && flag) {
			if (exclusion && !on && !add_path(ch, k))
				return false;
			if (!exclusion)
				st->id = on;
		} else if (exclusion || (flag && on)) {
			if (!add_path(ch, k))
				return false;
		} else {
			if (streq(k, "_id"))
				st->id = false;          /* computed */
			if (!assigned(ch, k, &it, true)) /* (0 beside 1s: refused) */
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

/* {$group: {_id: ..., ...}}: nothing is kept; _id renames the field it
 * names, or each of its members that names one ({_id: {x: "$a"}}). */
static bool read_group(stage_paths *ch, stage_change *st, const bson_iter_t *v)
{
	bson_iter_t it, id;
	st->keeps = st->group = true;
	st->id = false;
	ch->groups = true;
	bool found = false;
	if (!WIRE_ITER_HOLDS_DOCUMENT(v) || !wire_iter_recurse(v, &it))
		return false;
	while (!found && wire_iter_next(&it))
		found = streq(wire_iter_key(&it), "_id");
	if (!found)
		return false;
	const char *from = rename_source(&it);
	if (from)
		return add_rename(ch, "_id", from, false);
	if (!WIRE_ITER_HOLDS_DOCUMENT(&it) || !wire_iter_recurse(&it, &id) ||
	    !wire_iter_next(&id) || wire_iter_key(&id)[0] == '$')
		return true; /* a constant or an expression: no rename */
	do {
		const char *k = wire_iter_key(&id);
		if ((from = rename_source(&id)) && !strchr(k, '.') &&
		    !add_rename(ch, k, from, true))
			return false;
	} while (wire_iter_next(&id));
	return true;
}

/* $addFields / $set: each field assigned. */
static bool read_assign(stage_paths *ch, const bson_iter_t *v)
{
	bson_iter_t it;
	if (!WIRE_ITER_HOLDS_DOCUMENT(v) || !wire_iter_recurse(v, &it))
		return false;
	while (wire_iter_next(&it))
		if (!assigned(ch, wire_iter_key(&it), &it, false))
			return false;
	return true;
}

/* $unset: a field, or an array of them. */
static bool read_unset(stage_paths *ch, const bson_iter_t *v)
{
	bson_iter_t it;
	if (WIRE_ITER_HOLDS_UTF8(v))
		return add_path(ch, bson_iter_utf8(v, NULL));
	if (!WIRE_ITER_HOLDS_ARRAY(v) || !wire_iter_recurse(v, &it))
		return false;
	while (wire_iter_next(&it))
		if (!WIRE_ITER_HOLDS_UTF8(&it) || !add_path(ch, bson_iter_utf8(&it, NULL)))
			return false;
	return true;
}

/* $lookup: its `as`. */
static bool read_lookup(stage_paths *ch, const bson_iter_t *v)
{
	bson_iter_t it;
	if (!WIRE_ITER_HOLDS_DOCUMENT(v) || !wire_iter_recurse(v, &it) ||
	    !bson_iter_find(&it, "as") || !WIRE_ITER_HOLDS_UTF8(&it))
		return false;
	return add_path(ch, bson_iter_utf8(&it, NULL));
}

/* By the name's second byte, then the whole name: on every stage after
 * an aggregation's leading ones, most of which block. */
static bool read_stage(stage_paths *ch, stage_change *st, const char *k, const bson_iter_t *v)
{
	if (k[0] != '$')
		return false;
	switch (k[1]) {
	case 'm':
		return streq(k, "$match"); /* coalesces; changes nothing */
	case 's':
		if (streq(k, "$sort"))
			return true; /* changes nothing */
		return streq(k, "$set") && read_assign(ch, v);
	case 'a':
		return streq(k, "$addFields") && read_assign(ch, v);
	case 'u':
		if (streq(k, "$unwind"))
			return read_unwind(ch, v);
		return streq(k, "$unset") && read_unset(ch, v);
	case 'l':
		return streq(k, "$lookup") && read_lookup(ch, v);
	case 'g':
		return streq(k, "$group") && read_group(ch, st, v);
	case 'p':
		return streq(k, "$project") && WIRE_ITER_HOLDS_DOCUMENT(v) &&
		       read_project(ch, st, v);
	default:
		return false;
	}
}

bool stage_paths_add(stage_paths *ch, const char *k, const bson_iter_t *v)
{
	if (ch->nstages == STAGE_PATHS_STAGES)
		return false;
	stage_change *st = &ch->stage[ch->nstages];
	st->first = (uint8_t)ch->n;
	st->rfirst = (uint8_t)ch->nrenames;
	st->keeps = st->id = st->group = false;
	if (!read_stage(ch, st, k, v))
		return false;
	st->n = (uint8_t)(ch->n - st->first);
	st->rn = (uint8_t)(ch->nrenames - st->rfirst);
	ch->nstages++;
	return true;
}

/* Whether a filter's value names $exists or $type anywhere (too deep:
 * taken as naming one). */
static bool names_exists_or_type(const bson_iter_t *v, int depth)
{
	bson_iter_t c;
	bson_type_t t = wire_iter_type(v);
	if (t != BSON_TYPE_DOCUMENT && t != BSON_TYPE_ARRAY)
		return false;
	if (depth > 8 || !wire_iter_recurse(v, &c))
		return true;
	while (wire_iter_next(&c)) {
		const char *k = wire_iter_key(&c);
		if (streq(k, "$exists") || streq(k, "$type") || names_exists_or_type(&c, depth + 1))
			return true;
	}
	return false;
}

/* A $match mongod moves past a $group (stage_paths.h). */
static bool group_swappable(const bson_iter_t *match)
{
	bson_iter_t c;
	if (!match || !WIRE_ITER_HOLDS_DOCUMENT(match) || !wire_iter_recurse(match, &c))
		return false;
	while (wire_iter_next(&c))
		if (wire_iter_key(&c)[0] == '$' || names_exists_or_type(&c, 0))
			return false;
	return true;
}

static bool rename_is(const stage_rename *r, const char *f)
{
	if (r->under_id)
		return strncmp(f, "_id.", 4) == 0 && streq(f + 4, r->to);
	return streq(f, r->to);
}

static bool rename_overlaps(const stage_rename *r, const char *f)
{
	if (!r->under_id)
		return paths_overlap(f, r->to);
	return streq(f, "_id") || (strncmp(f, "_id.", 4) == 0 && paths_overlap(f + 4, r->to));
}

/* Whether the stage leaves the field f as it was. */
static bool unchanged(const stage_paths *ch, const stage_change *st, const char *f)
{
	const char *const *p = ch->path + st->first;
	if (!st->keeps) {
		for (unsigned i = 0; i < st->n; i++)
			if (paths_overlap(f, p[i]))
				return false;
		return true;
	}
	if (st->id && path_at_or_under(f, "_id", 3))
		return true;
	for (unsigned i = 0; i < st->n; i++)
		if (path_at_or_under(f, p[i], strlen(p[i])))
			return true;
	return false;
}

/* One stage, back: f's field before it (NULL: the member stops after it). */
static const char *back_past(const stage_paths *ch, const stage_change *st, const char *f)
{
	bool touched = false;
	for (unsigned i = 0; i < st->rn; i++) {
		const stage_rename *r = &ch->rename[st->rfirst + i];
		if (rename_is(r, f))
			return r->from;
		touched |= rename_overlaps(r, f);
	}
	return !touched && unchanged(ch, st, f) ? f : NULL;
}

bool stage_paths_group_ok(const stage_paths *ch, const bson_iter_t *match)
{
	return ch->groups && group_swappable(match);
}

unsigned stage_paths_back(const stage_paths *ch, const char *f, bool group_ok, const char **name)
{
	unsigned passed = 0;
	for (unsigned s = ch->nstages; s-- > 0; passed++) {
		const stage_change *st = &ch->stage[s];
		if (!f) { /* an operator member: only past what changes nothing */
			if (st->keeps || st->n || st->rn)
				break;
			continue;
		}
		const char *before = st->group && !group_ok ? NULL : back_past(ch, st, f);
		if (!before)
			break;
		f = before;
	}
	if (name)
		*name = f;
	return passed;
}
