/* What the index cache learns from commands passing by. DDL: when a
 * command that changes indexes or collections completes, the cache forgets
 * what it knew about what it named (the commands and their kinds are rows
 * of the command table, commands.c). Writes: the documents an insert or a
 * delete reports in its reply move the collection's known count. */
#include <bson/bson.h>

#include "analyzers/engine/engine_int.h"
#include "analyzers/engine/keys.h"
#include "protocol/wire_iter.h"

static void invalidate_dotted(index_cache *ic, const char *dotted, bool dropped)
{
	char db[128];
	const char *coll;
	if (split_ns(dotted, db, sizeof(db), &coll))
		(dropped ? index_cache_drop : index_cache_invalidate)(ic, db, coll);
}

/* Spellings compared without case: invalidating too often costs a
 * listIndexes; missing one leaves a wrong index list in the cache.
 * noinline: inlined, its name search made engine_is_ddl's path for a
 * command the table knows (every request's) save six registers. */
static __attribute__((noinline)) ddl_kind ddl_of(const cmdview *v)
{
	const command_def *c = commands_find_ddl(v->name);
	return c ? c->ddl : DDL_NONE;
}

bool engine_is_ddl(const cmdview *v, cmd_id id)
{
	if (id == CMD_NONE)
		return ddl_of(v) != DDL_NONE;
	const command_def *c = commands_of(id);
	return c && c->ddl != DDL_NONE;
}

int engine_ddl_scope(const char *name)
{
	const command_def *c = name ? commands_find_ddl(name) : NULL;
	return !c || c->ddl == DDL_NONE ? 0
	       : c->ddl == DDL_COLL     ? ENGINE_DDL_ONE
	                                : ENGINE_DDL_WIDER;
}

/* Forgets too much rather than too little: every name the command's row
 * says it touches is invalidated, since a list fetched again costs one
 * listIndexes and a stale one gives wrong verdicts. A collection the
 * command removes (drop, dropDatabase, a rename's source) is told as
 * dropped: a write that makes it again is a schema change of its own
 * (index_cache_drop). */
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
		if (arg && command_id(commands_find_ddl(v->name)) == CMD_DROP)
			index_cache_drop(e->ic, v->db, arg);
		else if (arg)
			index_cache_invalidate(e->ic, v->db, arg);
		break;
	case DDL_DATABASE:
		index_cache_drop(e->ic, v->db, NULL);
		break;
	case DDL_RENAME: /* on admin: "db.coll" to "db.coll" */
		if (arg)
			invalidate_dotted(e->ic, arg, true);
		if (bson_iter_init_find(&it, &v->body, "to") && WIRE_ITER_HOLDS_UTF8(&it))
			invalidate_dotted(e->ic, bson_iter_utf8(&it, NULL), false);
		break;
	case DDL_CLONE:
		if (bson_iter_init_find(&it, &v->body, "toCollection") && WIRE_ITER_HOLDS_UTF8(&it))
			index_cache_invalidate(e->ic, v->db, bson_iter_utf8(&it, NULL));
		break;
	default:
		break;
	}
}

/* The collection v names first, "db.coll" into ns; its name in *coll. */
static bool write_ns(const cmdview *v, char *ns, size_t cap, const char **coll)
{
	bson_iter_t it;
	if (!v->db || !bson_iter_init(&it, &v->body) || !wire_iter_next(&it) ||
	    !WIRE_ITER_HOLDS_UTF8(&it))
		return false;
	*coll = bson_iter_utf8(&it, NULL);
	ns_join(ns, cap, v->db, *coll);
	return true;
}

int engine_write_ns(const engine *e, const cmdview *v, cmd_id id, char *ns, size_t cap)
{
	const char *coll;
	if ((id != CMD_INSERT && id != CMD_DELETE) || !e->ic || !write_ns(v, ns, cap, &coll))
		return 0;
	return id == CMD_INSERT ? ENGINE_WRITE_INSERT : ENGINE_WRITE_DELETE;
}

bool engine_upsert_ns(const engine *e, const cmdview *v, cmd_id id, bool read_upsert, char *ns,
                      size_t cap)
{
	bson_iter_t it;
	const char *coll;
	/* an update's statements were read as it was judged (b); a
	 * findAndModify may have been judged by its connection's template,
	 * unread: its body says */
	bool upsert = id == CMD_UPDATE ? read_upsert
	              : id == CMD_FIND_AND_MODIFY
	                  ? bson_iter_init_find(&it, &v->body, "upsert") && bson_iter_as_bool(&it)
	                  : false;
	return upsert && e->ic && write_ns(v, ns, cap, &coll);
}

void engine_note_made(engine *e, const char *ns)
{
	char db[128];
	const char *coll;
	if (e->ic && split_ns(ns, db, sizeof(db), &coll))
		index_cache_note_made(e->ic, db, coll);
}

void engine_note_docs(engine *e, const char *ns, int64_t delta)
{
	char db[128];
	const char *coll;
	if (e->ic && split_ns(ns, db, sizeof(db), &coll))
		index_cache_note_docs(e->ic, db, coll, delta);
}

index_cache *engine_side_gate(const engine *e, const cmdview *v, cmd_id id)
{
	char ns[256];
	if (!e->ic || !v->db || !v->name)
		return NULL;
	return engine_is_ddl(v, id) ||
	               engine_write_ns(e, v, id, ns, sizeof(ns)) == ENGINE_WRITE_INSERT
	           ? e->ic
	           : NULL;
}
