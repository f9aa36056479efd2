/* The command table: one row per command the engine knows, saying
 * everything the engine does differently for it: its names, the body keys
 * its rules read, the analyser that finds its parts, whether explain can
 * wrap it, the question it asks the collection-scan rule, how the offline
 * report's shape of it is made, and what it does to the index cache.
 *
 * Adding a command is one row in commands.c and, unless an existing
 * analyser fits, one analyser in analysers.c (declared in engine_int.h). A command without a row
 * is forwarded at once, unanalysed (hello, getMore, ...).
 *
 * Engine-internal: only the engine's files and their tests include it. */
#ifndef MG_ANALYZERS_ENGINE_COMMANDS_H
#define MG_ANALYZERS_ENGINE_COMMANDS_H

#include <stdbool.h>
#include <stddef.h>
#include <strings.h>

#include "analyzers/engine/engine.h"
#include "analyzers/engine/keys.h"
#include "analyzers/rules/rule_api.h"
#include "protocol/cmdview.h"

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
	const char *name;   /* as the server spells it; the log and shapes show it */
	const char *alias;  /* another spelling the server accepts, or NULL */
	command_fn analyze; /* NULL: no rule reads it (a DDL-only row) */
	unsigned keys;      /* BK bits (body.h): the body keys its rules read */
	const char *stmts;  /* the sequence of its statements ("updates"), or NULL */
	unsigned stmt_keys; /* BK bits of each statement */
	/* PART_* (engine_int.h): the parts its analyser can hand to checks.
	 * The statement and view analysers walk nothing where no rule not off
	 * reads one; engine_may_block reads it for insert's PART_DOCUMENT. */
	unsigned parts;
	rule_query_kind query; /* what it asks the collection-scan rule */
	bool explainable;      /* {explain: {<it>: ...}} is analysed, as never run */
	bool db_wide;          /* may name no collection ({aggregate: 1}) */
	cmd_shape shape;
	ddl_kind ddl;
};

/* The rows by the first letter of their name (an alias starts with its
 * name's letter): the lookups below read one group. */
#define COMMANDS_LETTERS ('z' - 'a' + 1)

typedef struct command_group {
	const command_def *rows; /* NULL, or rows ending with a row whose name is NULL */
	bool ddl;                /* some row of the group has a ddl kind */
} command_group;

extern const command_group commands_groups[COMMANDS_LETTERS];

/* The row of a command name as the server looks it up: case-sensitive,
 * name or alias; NULL for a command the engine does not know (or NULL).
 * Inline, on every request: as cheap as the switch on the first letter it
 * replaced (keys.h compares two bytes before strcmp). */
static inline const command_def *commands_find(const char *name)
{
	if (!name)
		return NULL;
	unsigned i = (unsigned char)name[0] - (unsigned)'a';
	if (i >= COMMANDS_LETTERS)
		return NULL;
	for (const command_def *c = commands_groups[i].rows; c && c->name; c++)
		if (key_eq(name, c->name) || (c->alias && key_eq(name, c->alias)))
			return c;
	return NULL;
}

/* Without case: tolower on both sides equal implies |0x20 on both sides
 * equal, so the second byte rules a row out before strcasecmp is called. */
static inline bool commands_ddl_name_eq(const char *name, const char *row)
{
	return (name[1] | 0x20) == (row[1] | 0x20) && strcasecmp(name, row) == 0;
}

/* The row of a name compared without case, among the rows with a ddl kind;
 * NULL when none. Inline, on every forwarded request (engine_is_ddl): a
 * name of a group without DDL costs what the old first-letter test did. */
static inline const command_def *commands_find_ddl(const char *name)
{
	if (!name)
		return NULL;
	unsigned i = ((unsigned char)name[0] | 0x20) - (unsigned)'a';
	if (i >= COMMANDS_LETTERS || !commands_groups[i].ddl)
		return NULL;
	for (const command_def *c = commands_groups[i].rows; c->name; c++)
		if (c->ddl != DDL_NONE && (commands_ddl_name_eq(name, c->name) ||
		                           (c->alias && commands_ddl_name_eq(name, c->alias))))
			return c;
	return NULL;
}

/* The i-th row, for tests and for listing; NULL past the last. */
const command_def *commands_at(size_t i);

#endif
