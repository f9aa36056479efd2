/* The command table (commands.h). Rows are grouped by the first letter of
 * their name, so a lookup reads one short group, as the switch on the first
 * letter it replaced did; within a group the commands the rules read come
 * first, the busiest first. An alias starts with its name's letter. A row
 * with a ddl kind in a new group sets that group's ddl flag. */
#include "analyzers/engine/commands.h"

#include "analyzers/engine/body.h"
#include "analyzers/engine/engine_int.h"

/* What the query-like commands read: one collection, one filter, and for
 * some a sort and an update. */
#define QUERY_PARTS (PART_SORT | PART_FILTER | PART_QUERY)

/* The statements of update and delete. arrayFilters are shown in the shape
 * but never checked for regexes: they pick elements inside documents the
 * filter already selected, so they never decide an index scan. */
#define UPDATE_STMT_KEYS                                                                           \
	(BK(Q) | BK(U) | BK(UPSERT) | BK(ARRAY_FILTERS) | BK(MULTI) | BK(HINT) | BK(COLLATION))
#define DELETE_STMT_KEYS (BK(Q) | BK(LIMIT) | BK(HINT) | BK(COLLATION))

/* A command that only changes what the index cache knows. */
#define DDL_ROW(n, a, kind)                                                                        \
	{                                                                                          \
		.name = n, .alias = a, .shape = CMD_SHAPE_NAME, .ddl = kind                        \
	}

static const command_def rows_a[] = {
    {.name = "aggregate",
     .analyze = analyze_aggregate,
     .keys = BK(PIPELINE) | BK(COLLATION) | BK(HINT) | BK(EXPLAIN),
     .parts = PART_PIPELINE | PART_SORT | PART_QUERY,
     .query = RULE_QUERY_AGGREGATE,
     .explainable = true,
     .db_wide = true,
     .shape = CMD_SHAPE_BODY},
    {0},
};

static const command_def rows_b[] = {
    /* ops name their namespaces through nsInfo; findings are per op */
    {.name = "bulkWrite",
     .analyze = analyze_bulk_write,
     .parts = PART_FILTER | PART_UPDATE | PART_QUERY | PART_DOCUMENT,
     .explainable = true,
     .shape = CMD_SHAPE_NAME},
    {0},
};

static const command_def rows_c[] = {
    {.name = "count",
     .analyze = analyze_query,
     .keys = BK(QUERY) | BK(HINT) | BK(COLLATION),
     .parts = QUERY_PARTS,
     .query = RULE_QUERY_COUNT,
     .explainable = true,
     .shape = CMD_SHAPE_BODY},
    /* a view: its pipeline runs on every read of the view */
    {.name = "create",
     .analyze = analyze_view,
     .keys = BK(PIPELINE) | BK(COLLATION),
     .parts = PART_PIPELINE,
     .shape = CMD_SHAPE_NAME,
     .ddl = DDL_COLL},
    /* ... or a view's new pipeline */
    {.name = "collMod",
     .analyze = analyze_view,
     .keys = BK(PIPELINE) | BK(COLLATION),
     .parts = PART_PIPELINE,
     .shape = CMD_SHAPE_NAME,
     .ddl = DDL_COLL},
    DDL_ROW("createIndexes", NULL, DDL_COLL),
    DDL_ROW("convertToCapped", NULL, DDL_COLL),
    DDL_ROW("cloneCollectionAsCapped", NULL, DDL_CLONE),
    {0},
};

static const command_def rows_d[] = {
    {.name = "delete",
     .analyze = analyze_statements,
     .stmts = "deletes",
     .stmt_keys = DELETE_STMT_KEYS,
     .parts = PART_FILTER | PART_QUERY,
     .query = RULE_QUERY_DELETE,
     .explainable = true,
     .shape = CMD_SHAPE_FIRST_STMT},
    {.name = "distinct",
     .analyze = analyze_query,
     .keys = BK(KEY) | BK(QUERY) | BK(HINT) | BK(COLLATION),
     .parts = QUERY_PARTS,
     .query = RULE_QUERY_DISTINCT,
     .explainable = true,
     .shape = CMD_SHAPE_BODY},
    DDL_ROW("dropIndexes", "deleteIndexes", DDL_COLL),
    DDL_ROW("drop", NULL, DDL_COLL),
    DDL_ROW("dropDatabase", NULL, DDL_DATABASE),
    {0},
};

static const command_def rows_e[] = {
    /* {explain: {find: ...}, verbosity: ...}: the inner command, never run */
    {.name = "explain", .analyze = analyze_explain, .shape = CMD_SHAPE_INNER},
    {0},
};

static const command_def rows_f[] = {
    {.name = "find",
     .analyze = analyze_query,
     .keys = BK(FILTER) | BK(SORT) | BK(COLLATION) | BK(HINT) | BK(LIMIT) | BK(MIN_MAX),
     .parts = QUERY_PARTS,
     .query = RULE_QUERY_FIND,
     .explainable = true,
     .shape = CMD_SHAPE_BODY},
    {.name = "findAndModify",
     .alias = "findandmodify",
     .analyze = analyze_query,
     .keys = BK(QUERY) | BK(SORT) | BK(UPDATE) | BK(UPSERT) | BK(COLLATION) | BK(HINT),
     .parts = QUERY_PARTS | PART_UPDATE,
     .query = RULE_QUERY_FIND_AND_MODIFY,
     .explainable = true,
     .shape = CMD_SHAPE_BODY},
    {0},
};

static const command_def rows_i[] = {
    /* read only by document checks; explain cannot wrap it */
    {.name = "insert",
     .analyze = analyze_insert,
     .stmts = "documents",
     .parts = PART_DOCUMENT,
     .shape = CMD_SHAPE_NAME},
    {0},
};

static const command_def rows_r[] = {
    DDL_ROW("renameCollection", NULL, DDL_RENAME),
    {0},
};

static const command_def rows_u[] = {
    {.name = "update",
     .analyze = analyze_statements,
     .stmts = "updates",
     .stmt_keys = UPDATE_STMT_KEYS,
     .parts = PART_FILTER | PART_UPDATE | PART_QUERY,
     .query = RULE_QUERY_UPDATE,
     .explainable = true,
     .shape = CMD_SHAPE_FIRST_STMT},
    {0},
};

/* ddl: set where a row of the group has a ddl kind (test_engine_commands
 * checks every flag against the rows). */
const command_group commands_groups[COMMANDS_LETTERS] = {
    ['a' - 'a'] = {rows_a, false}, ['b' - 'a'] = {rows_b, false}, ['c' - 'a'] = {rows_c, true},
    ['d' - 'a'] = {rows_d, true},  ['e' - 'a'] = {rows_e, false}, ['f' - 'a'] = {rows_f, false},
    ['i' - 'a'] = {rows_i, false}, ['r' - 'a'] = {rows_r, true},  ['u' - 'a'] = {rows_u, false},
};

const command_def *commands_at(size_t n)
{
	for (size_t i = 0; i < COMMANDS_LETTERS; i++)
		for (const command_def *c = commands_groups[i].rows; c && c->name; c++)
			if (n-- == 0)
				return c;
	return NULL;
}
