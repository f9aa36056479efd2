/* DDL passing by: when a command that changes indexes or collections
 * completes, the index cache forgets what it knew about what it named. The
 * commands and their kinds are rows of the command table (commands.c). */
#include <bson/bson.h>

#include "analyzers/engine_int.h"
#include "protocol/wire_iter.h"

static void invalidate_dotted(index_cache *ic, const char *dotted)
{
	char db[128];
	const char *coll;
	if (split_ns(dotted, db, sizeof(db), &coll))
		index_cache_invalidate(ic, db, coll);
}

/* Spellings compared without case: invalidating too often costs a
 * listIndexes; missing one leaves a wrong index list in the cache. */
static ddl_kind ddl_of(const cmdview *v)
{
	const command_def *c = commands_find_ddl(v->name);
	return c ? c->ddl : DDL_NONE;
}

bool engine_is_ddl(const cmdview *v)
{
	return ddl_of(v) != DDL_NONE;
}

void engine_note_ddl(engine *e, const cmdview *v)
{
	ddl_kind kind = ddl_of(v);
	if (!e->ic || !v->db || kind == DDL_NONE)
		return;
	bson_iter_t it;
	if (!bson_iter_init(&it, &v->body) || !wire_iter_next(&it))
		return;
	const char *arg = WIRE_ITER_HOLDS_UTF8(&it) ? bson_iter_utf8(&it, NULL) : NULL;
	switch (kind) {
	case DDL_COLL:
		if (arg)
			index_cache_invalidate(e->ic, v->db, arg);
		break;
	case DDL_DATABASE:
		index_cache_invalidate(e->ic, v->db, NULL);
		break;
	case DDL_RENAME: /* on admin: "db.coll" to "db.coll" */
		if (arg)
			invalidate_dotted(e->ic, arg);
		if (bson_iter_init_find(&it, &v->body, "to") && WIRE_ITER_HOLDS_UTF8(&it))
			invalidate_dotted(e->ic, bson_iter_utf8(&it, NULL));
		break;
	case DDL_CLONE:
		if (bson_iter_init_find(&it, &v->body, "toCollection") && WIRE_ITER_HOLDS_UTF8(&it))
			index_cache_invalidate(e->ic, v->db, bson_iter_utf8(&it, NULL));
		break;
	default:
		break;
	}
}
