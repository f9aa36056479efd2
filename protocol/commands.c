/* The command table (commands.h). */
#include "protocol/commands.h"

#define ALIAS(n, of)                                                                               \
	{                                                                                          \
		.name = n, .alias_of = of                                                          \
	}

#define DDL(n)                                                                                     \
	{                                                                                          \
		.name = n, .kind = CMD_KIND_DDL, .label = CMD_LABEL_DDL                            \
	}

#define CREDENTIALS(n, l)                                                                          \
	{                                                                                          \
		.name = n, .credentials = true, .label = l                                         \
	}

/* Driver and shell housekeeping (cmd_row.housekeeping). */
#define HOUSEKEEPING(n, l)                                                                         \
	{                                                                                          \
		.name = n, .housekeeping = true, .label = l                                        \
	}

const cmd_row cmd_rows[CMD_IDS] = {
    [CMD_AGGREGATE] = {.name = "aggregate", .kind = CMD_KIND_READ, .label = CMD_LABEL_AGGREGATE},
    [CMD_AUTHENTICATE] = {.name = "authenticate",
                          .credentials = true,
                          .housekeeping = true,
                          .label = CMD_LABEL_AUTH},
    /* mongosh asks at start; mongod outside Atlas answers it with an error */
    [CMD_ATLAS_VERSION] = HOUSEKEEPING("atlasVersion", CMD_LABEL_OTHER),
    /* ops name their namespaces through nsInfo, kept whole by the capture */
    [CMD_BULK_WRITE] = {.name = "bulkWrite",
                        .kind = CMD_KIND_WRITE,
                        .stmts = "ops",
                        .seq = CMD_SEQ_STATEMENTS,
                        .filter = "filter",
                        .update = "updateMods",
                        .label = CMD_LABEL_BULK_WRITE},
    [CMD_BUILD_INFO] = HOUSEKEEPING("buildInfo", CMD_LABEL_OTHER),
    [CMD_BUILDINFO] = ALIAS("buildinfo", CMD_BUILD_INFO),
    [CMD_COUNT] = {.name = "count",
                   .kind = CMD_KIND_READ,
                   .filter = "query",
                   .label = CMD_LABEL_COUNT},
    [CMD_CREATE] = DDL("create"),
    [CMD_COLL_MOD] = DDL("collMod"),
    [CMD_CREATE_INDEXES] = DDL("createIndexes"),
    [CMD_CONVERT_TO_CAPPED] = DDL("convertToCapped"),
    [CMD_CLONE_COLLECTION_AS_CAPPED] = DDL("cloneCollectionAsCapped"),
    [CMD_CREATE_USER] = CREDENTIALS("createUser", CMD_LABEL_OTHER),
    [CMD_COPYDB] = CREDENTIALS("copydb", CMD_LABEL_OTHER),
    [CMD_COPYDB_SASL_START] = CREDENTIALS("copydbsaslstart", CMD_LABEL_OTHER),
    [CMD_CONNECTION_STATUS] = HOUSEKEEPING("connectionStatus", CMD_LABEL_OTHER),
    [CMD_DELETE] = {.name = "delete",
                    .kind = CMD_KIND_WRITE,
                    .stmts = "deletes",
                    .seq = CMD_SEQ_STATEMENTS,
                    .filter = "q",
                    .label = CMD_LABEL_DELETE},
    [CMD_DISTINCT] = {.name = "distinct",
                      .kind = CMD_KIND_READ,
                      .filter = "query",
                      .label = CMD_LABEL_DISTINCT},
    [CMD_DROP_INDEXES] = DDL("dropIndexes"),
    [CMD_DELETE_INDEXES] = ALIAS("deleteIndexes", CMD_DROP_INDEXES),
    [CMD_DROP] = DDL("drop"),
    [CMD_DROP_DATABASE] = DDL("dropDatabase"),
    /* {explain: {find: ...}}: the command it wraps is read, never run */
    [CMD_EXPLAIN] = {.name = "explain", .label = CMD_LABEL_EXPLAIN},
    [CMD_END_SESSIONS] = HOUSEKEEPING("endSessions", CMD_LABEL_END_SESSIONS),
    [CMD_FIND] = {.name = "find",
                  .kind = CMD_KIND_READ,
                  .filter = "filter",
                  .label = CMD_LABEL_FIND},
    [CMD_FIND_AND_MODIFY] = {.name = "findAndModify",
                             .kind = CMD_KIND_WRITE,
                             .filter = "query",
                             .update = "update",
                             .label = CMD_LABEL_FIND_AND_MODIFY},
    [CMD_FINDANDMODIFY] = ALIAS("findandmodify", CMD_FIND_AND_MODIFY),
    /* continues the read that opened the cursor, which the report counts */
    [CMD_GET_MORE] = {.name = "getMore", .label = CMD_LABEL_GET_MORE},
    [CMD_GET_PARAMETER] = HOUSEKEEPING("getParameter", CMD_LABEL_OTHER),
    [CMD_GET_LOG] = HOUSEKEEPING("getLog", CMD_LABEL_OTHER),
    [CMD_GET_CMD_LINE_OPTS] = HOUSEKEEPING("getCmdLineOpts", CMD_LABEL_OTHER),
    [CMD_HELLO] = HOUSEKEEPING("hello", CMD_LABEL_HELLO),
    [CMD_HOST_INFO] = HOUSEKEEPING("hostInfo", CMD_LABEL_OTHER),
    [CMD_INSERT] = {.name = "insert",
                    .kind = CMD_KIND_WRITE,
                    .stmts = "documents",
                    .seq = CMD_SEQ_DOCUMENTS,
                    .label = CMD_LABEL_INSERT},
    [CMD_IS_MASTER] = ALIAS("isMaster", CMD_HELLO),
    [CMD_ISMASTER] = ALIAS("ismaster", CMD_HELLO),
    [CMD_KILL_CURSORS] = {.name = "killCursors", .label = CMD_LABEL_KILL_CURSORS},
    /* mongosh lists them at start, for its prompt and completion */
    [CMD_LIST_DATABASES] = HOUSEKEEPING("listDatabases", CMD_LABEL_OTHER),
    [CMD_LOGOUT] = HOUSEKEEPING("logout", CMD_LABEL_OTHER),
    [CMD_PING] = HOUSEKEEPING("ping", CMD_LABEL_PING),
    [CMD_RENAME_COLLECTION] = DDL("renameCollection"),
    [CMD_SASL_START] = {.name = "saslStart",
                        .credentials = true,
                        .housekeeping = true,
                        .label = CMD_LABEL_AUTH},
    [CMD_SASL_CONTINUE] = {.name = "saslContinue",
                           .credentials = true,
                           .housekeeping = true,
                           .label = CMD_LABEL_AUTH},
    [CMD_UPDATE] = {.name = "update",
                    .kind = CMD_KIND_WRITE,
                    .stmts = "updates",
                    .seq = CMD_SEQ_STATEMENTS,
                    .filter = "q",
                    .update = "u",
                    .label = CMD_LABEL_UPDATE},
    [CMD_UPDATE_USER] = CREDENTIALS("updateUser", CMD_LABEL_OTHER),
    [CMD_WHATSMYURI] = HOUSEKEEPING("whatsmyuri", CMD_LABEL_OTHER),
};

/* Hand-kept beside the ids' order; test_proxy_commands checks each run and
 * each ddl flag against the rows. */
const cmd_letter cmd_letters[CMD_LETTERS] = {
    ['a' - 'a'] = {CMD_AGGREGATE, CMD_BULK_WRITE, false},
    ['b' - 'a'] = {CMD_BULK_WRITE, CMD_COUNT, false},
    ['c' - 'a'] = {CMD_COUNT, CMD_DELETE, true},
    ['d' - 'a'] = {CMD_DELETE, CMD_EXPLAIN, true},
    ['e' - 'a'] = {CMD_EXPLAIN, CMD_FIND, false},
    ['f' - 'a'] = {CMD_FIND, CMD_GET_MORE, false},
    ['g' - 'a'] = {CMD_GET_MORE, CMD_HELLO, false},
    ['h' - 'a'] = {CMD_HELLO, CMD_INSERT, false},
    ['i' - 'a'] = {CMD_INSERT, CMD_KILL_CURSORS, false},
    ['k' - 'a'] = {CMD_KILL_CURSORS, CMD_LIST_DATABASES, false},
    ['l' - 'a'] = {CMD_LIST_DATABASES, CMD_PING, false},
    ['p' - 'a'] = {CMD_PING, CMD_RENAME_COLLECTION, false},
    ['r' - 'a'] = {CMD_RENAME_COLLECTION, CMD_SASL_START, true},
    ['s' - 'a'] = {CMD_SASL_START, CMD_UPDATE, false},
    ['u' - 'a'] = {CMD_UPDATE, CMD_WHATSMYURI, false},
    ['w' - 'a'] = {CMD_WHATSMYURI, CMD_IDS, false},
};

static const char *const label_names[CMD_LABELS] = {
    [CMD_LABEL_OTHER] = "other",
    [CMD_LABEL_FIND] = "find",
    [CMD_LABEL_AGGREGATE] = "aggregate",
    [CMD_LABEL_GET_MORE] = "getMore",
    [CMD_LABEL_INSERT] = "insert",
    [CMD_LABEL_UPDATE] = "update",
    [CMD_LABEL_DELETE] = "delete",
    [CMD_LABEL_FIND_AND_MODIFY] = "findAndModify",
    [CMD_LABEL_BULK_WRITE] = "bulkWrite",
    [CMD_LABEL_COUNT] = "count",
    [CMD_LABEL_DISTINCT] = "distinct",
    [CMD_LABEL_EXPLAIN] = "explain",
    [CMD_LABEL_HELLO] = "hello",
    [CMD_LABEL_PING] = "ping",
    [CMD_LABEL_AUTH] = "auth",
    [CMD_LABEL_KILL_CURSORS] = "killCursors",
    [CMD_LABEL_END_SESSIONS] = "endSessions",
    [CMD_LABEL_DDL] = "ddl",
};

const char *cmd_label_name(cmd_label l)
{
	return (unsigned)l < CMD_LABELS ? label_names[l] : label_names[CMD_LABEL_OTHER];
}

static bool names(const char *key, const char *row)
{
	return row && cmd_name_eq(key, row);
}

/* Off the request path (the capture's writer): a walk of the rows. */
cmd_key_role cmd_key_role_of(const char *key)
{
	for (unsigned id = CMD_NONE + 1; id < CMD_IDS; id++) {
		const cmd_row *r = &cmd_rows[id];
		if (names(key, r->filter))
			return CMD_KEY_FILTER;
		if (names(key, r->update))
			return CMD_KEY_UPDATE;
		if (names(key, r->stmts))
			return r->seq == CMD_SEQ_DOCUMENTS ? CMD_KEY_DOCUMENTS : CMD_KEY_STATEMENTS;
	}
	return CMD_KEY_OTHER;
}
