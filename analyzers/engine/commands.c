/* The engine's columns of the command table (commands.h), by the shared
 * table's ids (protocol/commands.c), which also keeps the order lookups
 * read them in. */
#include "analyzers/engine/commands.h"

#include "analyzers/engine/body.h"

/* What the query-like commands read: one collection, one filter, and for
 * some a sort and an update. */
#define QUERY_PARTS (PART_SORT | PART_FILTER | PART_QUERY)

/* The statements of update and delete. arrayFilters are shown in the shape
 * but never checked for regexes: they pick elements inside documents the
 * filter already selected, so they never decide an index scan. */
#define UPDATE_STMT_KEYS                                                                           \
	(BK(Q) | BK(U) | BK(UPSERT) | BK(ARRAY_FILTERS) | BK(MULTI) | BK(HINT) | BK(COLLATION) |   \
	 BK(SORT))
#define DELETE_STMT_KEYS (BK(Q) | BK(LIMIT) | BK(HINT) | BK(COLLATION))

/* A command that only changes what the index cache knows. */
#define DDL_ROW(kind)                                                                              \
	{                                                                                          \
		.shape = CMD_SHAPE_NAME, .ddl = kind                                               \
	}

const command_def commands_rows[CMD_IDS] = {
    [CMD_AGGREGATE] = {.analyze = analyze_aggregate,
                       .keys = BK(PIPELINE) | BK(COLLATION) | BK(HINT) | BK(EXPLAIN),
                       .parts = PART_PIPELINE | PART_SORT | PART_QUERY,
                       .query = RULE_QUERY_AGGREGATE,
                       .explainable = true,
                       .db_wide = true,
                       .shape = CMD_SHAPE_BODY},
    /* ops name their namespaces through nsInfo; findings are per op */
    [CMD_BULK_WRITE] = {.analyze = analyze_bulk_write,
                        .parts = PART_FILTER | PART_UPDATE | PART_QUERY | PART_DOCUMENT | PART_SORT,
                        .explainable = true,
                        .shape = CMD_SHAPE_NAME},
    [CMD_COUNT] = {.analyze = analyze_query,
                   .keys = BK(QUERY) | BK(HINT) | BK(COLLATION),
                   .parts = QUERY_PARTS,
                   .query = RULE_QUERY_COUNT,
                   .explainable = true,
                   .shape = CMD_SHAPE_BODY},
    /* a view: its pipeline runs on every read of the view */
    [CMD_CREATE] = {.analyze = analyze_view,
                    .keys = BK(PIPELINE) | BK(COLLATION),
                    .parts = PART_PIPELINE,
                    .shape = CMD_SHAPE_NAME,
                    .ddl = DDL_COLL},
    /* ... or a view's new pipeline */
    [CMD_COLL_MOD] = {.analyze = analyze_view,
                      .keys = BK(PIPELINE) | BK(COLLATION),
                      .parts = PART_PIPELINE,
                      .shape = CMD_SHAPE_NAME,
                      .ddl = DDL_COLL},
    [CMD_CREATE_INDEXES] = DDL_ROW(DDL_COLL),
    [CMD_CONVERT_TO_CAPPED] = DDL_ROW(DDL_COLL),
    [CMD_CLONE_COLLECTION_AS_CAPPED] = DDL_ROW(DDL_CLONE),
    [CMD_DELETE] = {.analyze = analyze_statements,
                    .stmt_keys = DELETE_STMT_KEYS,
                    .parts = PART_FILTER | PART_QUERY,
                    .query = RULE_QUERY_DELETE,
                    .explainable = true,
                    .shape = CMD_SHAPE_FIRST_STMT},
    [CMD_DISTINCT] = {.analyze = analyze_query,
                      .keys = BK(KEY) | BK(QUERY) | BK(HINT) | BK(COLLATION),
                      .parts = QUERY_PARTS,
                      .query = RULE_QUERY_DISTINCT,
                      .explainable = true,
                      .shape = CMD_SHAPE_BODY},
    [CMD_DROP_INDEXES] = DDL_ROW(DDL_COLL),
    [CMD_DROP] = DDL_ROW(DDL_COLL),
    [CMD_DROP_DATABASE] = DDL_ROW(DDL_DATABASE),
    /* {explain: {find: ...}, verbosity: ...}: the inner command, never run */
    [CMD_EXPLAIN] = {.analyze = analyze_explain, .shape = CMD_SHAPE_INNER},
    [CMD_FIND] = {.analyze = analyze_query,
                  .keys = BK(FILTER) | BK(SORT) | BK(COLLATION) | BK(HINT) | BK(LIMIT) |
                          BK(MIN_MAX) | BK(SKIP),
                  .parts = QUERY_PARTS,
                  .query = RULE_QUERY_FIND,
                  .explainable = true,
                  .shape = CMD_SHAPE_BODY},
    [CMD_FIND_AND_MODIFY] = {.analyze = analyze_query,
                             .keys = BK(QUERY) | BK(SORT) | BK(UPDATE) | BK(UPSERT) |
                                     BK(COLLATION) | BK(HINT),
                             .parts = QUERY_PARTS | PART_UPDATE,
                             .query = RULE_QUERY_FIND_AND_MODIFY,
                             .explainable = true,
                             .shape = CMD_SHAPE_BODY},
    /* read only by document checks; explain cannot wrap it */
    [CMD_INSERT] = {.analyze = analyze_insert, .parts = PART_DOCUMENT, .shape = CMD_SHAPE_NAME},
    [CMD_RENAME_COLLECTION] = DDL_ROW(DDL_RENAME),
    [CMD_UPDATE] = {.analyze = analyze_statements,
                    .stmt_keys = UPDATE_STMT_KEYS,
                    /* a statement's sort (updateOne, 8.0) picks the document */
                    .parts = PART_FILTER | PART_UPDATE | PART_QUERY | PART_SORT,
                    .query = RULE_QUERY_UPDATE,
                    .explainable = true,
                    .shape = CMD_SHAPE_FIRST_STMT},
};

const command_def *commands_at(size_t n)
{
	for (unsigned id = CMD_NONE + 1; id < CMD_IDS; id++)
		if (commands_of((cmd_id)id) && n-- == 0)
			return &commands_rows[id];
	return NULL;
}
