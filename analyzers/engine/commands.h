/* The engine's columns of the command table: for each command of the
 * shared table (protocol/commands.h) the engine reads, everything it does
 * differently for it: the body keys its rules read, the analyser that finds
 * its parts, whether explain can wrap it, the question it asks the
 * collection-scan rule, how the offline report's shape of it is made, and
 * what it does to the index cache. Its name, aliases, statement sequence
 * and kind are the shared row's.
 *
 * Adding a command the engine reads is one shared row, one row of
 * commands_rows (by its cmd_id) and, unless an existing analyser fits, one
 * analyser in analysers.c (declared below). A command without a row here is
 * forwarded at once, unanalysed (hello, getMore, ...).
 *
 * Engine-internal: only the engine's files and their tests include it. It
 * needs nothing of engine_int.h, which includes it. */
#ifndef MG_ANALYZERS_ENGINE_COMMANDS_H
#define MG_ANALYZERS_ENGINE_COMMANDS_H

#include <stdbool.h>
#include <stddef.h>

#include "analyzers/engine/engine.h"
#include "analyzers/rules/rule_api.h"
#include "protocol/cmdview.h"
#include "protocol/commands.h"

/* ---- the parts of a request a rule's checks read ---- */

/* The kinds of check (rule_checks), one row each. The order is the order
 * in which a request's parts are checked where one site has several; sort
 * first (see run_checks). */
typedef enum {
	CHECK_SORT,
	CHECK_FILTER,
	CHECK_UPDATE,
	CHECK_PIPELINE,
	CHECK_QUERY,
	CHECK_DOCUMENT,
	CHECK_KINDS,
} check_kind;

/* One bit per check kind: what a rule's checks read, and what a command's
 * analyser can hand to checks. */
enum {
	PART_SORT = 1u << CHECK_SORT,
	PART_FILTER = 1u << CHECK_FILTER,
	PART_UPDATE = 1u << CHECK_UPDATE,
	PART_PIPELINE = 1u << CHECK_PIPELINE,
	PART_QUERY = 1u << CHECK_QUERY,
	PART_DOCUMENT = 1u << CHECK_DOCUMENT,
	/* Not a part: the request's query has a collation (facts_ready, for a
	 * rule whose facts matter only then: rule_def.needs_indexes_collated). */
	PART_COLLATED = 1u << CHECK_KINDS,
};

/* ---- the columns ---- */

/* What a command does to the index cache when it completes (cache_feed.c). */
typedef enum {
	DDL_NONE,
	DDL_COLL,     /* the collection its first value names */
	DDL_DATABASE, /* the whole database */
	DDL_RENAME,   /* "db.coll" (its first value) and its "to" */
	DDL_CLONE,    /* its "toCollection" */
} ddl_kind;

/* How engine_shape() finds the parts of the offline report's shape: for
 * the query-like commands and statements, the parts their findings show.
 * insert and bulkWrite findings are per document / per op, so their row
 * has the command alone; so have create and collMod, although a view's
 * findings show its pipeline (as engine_shape always did). */
typedef enum {
	CMD_SHAPE_NAME,       /* the command and its collection alone */
	CMD_SHAPE_BODY,       /* the body's `keys` */
	CMD_SHAPE_FIRST_STMT, /* the first statement's `stmt_keys` */
	CMD_SHAPE_INNER,      /* explain: the command it wraps, marked explain */
} cmd_shape;

typedef struct command_def command_def;

/* Finds the parts of the request and runs the checks on them; ax->cmd is
 * the row. Reads only the view and the engine, so it can run again on a
 * saved copy of the request (a held one is analysed again when its index
 * list comes). */
typedef verdict (*command_fn)(rule_ctx *ax, const cmdview *v);

struct command_def {
	command_fn analyze; /* NULL: no rule reads it (a DDL-only row) */
	unsigned keys;      /* BK bits (body.h): the body keys its rules read */
	unsigned stmt_keys; /* BK bits of each statement of the shared row's stmts */
	/* PART_*: the parts its analyser can hand to checks. The statement and
	 * view analysers walk nothing where no rule not off reads one;
	 * engine_may_block reads it for insert's PART_DOCUMENT. */
	unsigned parts;
	rule_query_kind query; /* what it asks the collection-scan rule */
	bool explainable;      /* {explain: {<it>: ...}} is analysed, as never run */
	bool db_wide;          /* may name no collection ({aggregate: 1}) */
	cmd_shape shape;
	ddl_kind ddl;
};

/* By cmd_id; the ids the engine does not read are zero rows. */
extern const command_def commands_rows[CMD_IDS];

/* The shared row of a row of commands_rows, and what the engine reads of it. */
static inline cmd_id command_id(const command_def *c)
{
	return (cmd_id)(c - commands_rows);
}

static inline const cmd_row *command_row(const command_def *c)
{
	return &cmd_rows[command_id(c)];
}

static inline const char *command_name(const command_def *c)
{
	return command_row(c)->name;
}

static inline const char *command_stmts(const command_def *c)
{
	return command_row(c)->stmts;
}

/* The engine's row of a command; NULL where the engine does not read it. */
static inline const command_def *commands_of(cmd_id id)
{
	const command_def *c = &commands_rows[id];
	return c->analyze || c->ddl != DDL_NONE ? c : NULL;
}

/* The row of a command name as the server looks it up: case-sensitive,
 * name or alias; NULL for a command the engine does not know (or NULL).
 * Inline, on every request. */
static inline const command_def *commands_find(const char *name)
{
	return commands_of(cmd_find(name));
}

/* The row of a name compared without case, among the DDL commands; NULL
 * when none. Inline, on every forwarded request (engine_is_ddl). */
static inline const command_def *commands_find_ddl(const char *name)
{
	return commands_of(cmd_find_ddl(name));
}

/* The i-th row, for tests and for listing; NULL past the last. */
const command_def *commands_at(size_t i);

/* ---- analysers.c: the analysers of the rows ---- */

verdict analyze_query(rule_ctx *ax, const cmdview *v); /* find, findAndModify, count, distinct */
verdict analyze_aggregate(rule_ctx *ax, const cmdview *v);  /* aggregate */
verdict analyze_view(rule_ctx *ax, const cmdview *v);       /* create / collMod of a view */
verdict analyze_statements(rule_ctx *ax, const cmdview *v); /* update, delete */
verdict analyze_insert(rule_ctx *ax, const cmdview *v);     /* insert */
verdict analyze_bulk_write(rule_ctx *ax, const cmdview *v); /* bulkWrite */
verdict analyze_explain(rule_ctx *ax, const cmdview *v);    /* explain: the inner command */

#endif
