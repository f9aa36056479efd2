/* The command table: one row per MongoDB command mongoguard tells apart,
 * read by every part that treats a command by its name. A row says what
 * the command is to the whole tree: read, write or DDL; the sequence its
 * statements come in; the keys of its filter and update (what the
 * capture's redaction keeps the shape of); whether it carries a credential
 * (captured redacted even when redaction is off); and its metrics label.
 *
 *   the engine (analyzers/engine/commands.c)  its own columns, by cmd_id
 *   the metrics (proxy/admin/metrics.h)       the label
 *   the report (report/)                      read or write, statements,
 *                                             housekeeping
 *   the capture (capture.c, capture_redact.c) redaction
 *
 * Adding a command is one id, one row here, and where the engine reads it
 * its column in analyzers/engine/commands.c. tests/unit/test_proxy_commands.c
 * fails when a command is known in one of those places only.
 *
 * Pure data and an inline lookup: protocol/ is the lowest layer, so the
 * capture's redaction can read the rows. */
#ifndef MG_PROTOCOL_COMMANDS_H
#define MG_PROTOCOL_COMMANDS_H

#include <stdbool.h>
#include <string.h>
#include <strings.h>

/* Every spelling the table knows, grouped by first letter (cmd_find reads
 * one letter's run), the busiest first within a letter. An alias has an
 * id of its own, whose row names the command it spells. */
typedef enum {
	CMD_NONE, /* no row: a command the table does not know */
	CMD_AGGREGATE,
	CMD_AUTHENTICATE,
	CMD_ATLAS_VERSION,
	CMD_BULK_WRITE,
	CMD_BUILD_INFO,
	CMD_BUILDINFO, /* alias of buildInfo */
	CMD_COUNT,
	CMD_CREATE,
	CMD_COLL_MOD,
	CMD_CREATE_INDEXES,
	CMD_CONVERT_TO_CAPPED,
	CMD_CLONE_COLLECTION_AS_CAPPED,
	CMD_CREATE_USER,
	CMD_COPYDB,
	CMD_COPYDB_SASL_START,
	CMD_CONNECTION_STATUS,
	CMD_DELETE,
	CMD_DISTINCT,
	CMD_DROP_INDEXES,
	CMD_DELETE_INDEXES, /* alias of dropIndexes */
	CMD_DROP,
	CMD_DROP_DATABASE,
	CMD_EXPLAIN,
	CMD_END_SESSIONS,
	CMD_FIND,
	CMD_FIND_AND_MODIFY,
	CMD_FINDANDMODIFY, /* alias of findAndModify */
	CMD_GET_MORE,
	CMD_GET_PARAMETER,
	CMD_GET_LOG,
	CMD_GET_CMD_LINE_OPTS,
	CMD_HELLO,
	CMD_HOST_INFO,
	CMD_INSERT,
	CMD_IS_MASTER, /* alias of hello */
	CMD_ISMASTER,  /* alias of hello */
	CMD_KILL_CURSORS,
	CMD_LIST_DATABASES,
	CMD_LOGOUT,
	CMD_PING,
	CMD_RENAME_COLLECTION,
	CMD_SASL_START,
	CMD_SASL_CONTINUE,
	CMD_UPDATE,
	CMD_UPDATE_USER,
	CMD_WHATSMYURI,
	CMD_IDS,
} cmd_id;

/* What a command does to data, as the report counts it. In this order:
 * the kinds from CMD_KIND_WRITE on change data or schema (cmd_changes
 * says so). */
typedef enum {
	CMD_KIND_OTHER, /* handshake, auth, cursors, sessions, explain */
	CMD_KIND_READ,  /* selects documents by a query and returns them */
	CMD_KIND_WRITE, /* inserts, updates or deletes documents */
	CMD_KIND_DDL,   /* changes collections or indexes (the index cache forgets them) */
} cmd_kind;

/* How the documents of its statement sequence are read. */
typedef enum {
	CMD_SEQ_NONE,
	CMD_SEQ_STATEMENTS, /* each a statement: its own filter, update, options */
	CMD_SEQ_DOCUMENTS,  /* application documents, stored as measures only */
} cmd_seq;

/* The command label of mongoguard_commands_total: the commands worth
 * telling apart, everything else "other" (zero, so a row without a label
 * of its own and every unknown name count there). */
typedef enum {
	CMD_LABEL_OTHER,
	CMD_LABEL_FIND,
	CMD_LABEL_AGGREGATE,
	CMD_LABEL_GET_MORE,
	CMD_LABEL_INSERT,
	CMD_LABEL_UPDATE,
	CMD_LABEL_DELETE,
	CMD_LABEL_FIND_AND_MODIFY,
	CMD_LABEL_BULK_WRITE,
	CMD_LABEL_COUNT,
	CMD_LABEL_DISTINCT,
	CMD_LABEL_EXPLAIN,
	CMD_LABEL_HELLO,
	CMD_LABEL_PING,
	CMD_LABEL_AUTH, /* saslStart, saslContinue, authenticate */
	CMD_LABEL_KILL_CURSORS,
	CMD_LABEL_END_SESSIONS,
	CMD_LABEL_DDL, /* every row of kind DDL */
	CMD_LABELS,
} cmd_label;

typedef struct cmd_row {
	const char *name; /* as the server spells it: case-sensitive */
	cmd_id alias_of;  /* an alias: the command it spells (whose row says the rest) */
	cmd_kind kind;
	const char *stmts; /* its statement sequence ("updates"), or NULL */
	cmd_seq seq;       /* how that sequence's documents are read */
	/* The key of its filter and of its update: in the body, or where it
	 * has statements, in each statement. NULL: none. */
	const char *filter;
	const char *update;
	bool credentials; /* holds a password or a SASL conversation */
	/* What drivers and shells send on their own, to connect, authenticate,
	 * learn the server and keep sessions (hello, buildInfo, ping, saslStart,
	 * endSessions, ...), never the application's data: the report counts
	 * these apart from the application's query shapes. */
	bool housekeeping;
	cmd_label label;
} cmd_row;

extern const cmd_row cmd_rows[CMD_IDS];

/* Whether the command changes data or schema: a write or DDL (CMD_NONE's
 * row is other). Another operation's work, so a join in progress ends. */
static inline bool cmd_changes(cmd_id id)
{
	return cmd_rows[id].kind >= CMD_KIND_WRITE;
}

/* The ids of one first letter: [first, end). ddl: one of them is a DDL
 * command or an alias of one (cmd_find_ddl skips the other letters). */
typedef struct cmd_letter {
	cmd_id first, end;
	bool ddl;
} cmd_letter;

#define CMD_LETTERS ('z' - 'a' + 1)
extern const cmd_letter cmd_letters[CMD_LETTERS];

/* The label's text ("find", "auth", "other"). */
const char *cmd_label_name(cmd_label l);

/* Most names differ from a row's in their first two bytes: compare those
 * before paying a call (a row's name is never empty). */
static inline bool cmd_name_eq(const char *name, const char *row)
{
	if (name[0] != row[0] || name[1] != row[1])
		return false;
	return row[1] == '\0' || strcmp(name + 2, row + 2) == 0;
}

/* The command a name spells, as the server looks it up: case-sensitive,
 * an alias giving the command it spells; CMD_NONE for a name the table
 * does not know (or NULL). Inline: on every request (the metrics' label
 * and the engine's row). */
static inline cmd_id cmd_find(const char *name)
{
	if (!name)
		return CMD_NONE;
	unsigned i = (unsigned char)name[0] - (unsigned)'a';
	if (i >= CMD_LETTERS)
		return CMD_NONE;
	for (unsigned id = cmd_letters[i].first; id < cmd_letters[i].end; id++)
		if (cmd_name_eq(name, cmd_rows[id].name))
			return cmd_rows[id].alias_of ? cmd_rows[id].alias_of : (cmd_id)id;
	return CMD_NONE;
}

/* Without case: tolower on both sides equal implies |0x20 on both sides
 * equal, so the second byte rules a row out before strcasecmp is called. */
static inline bool cmd_name_caseeq(const char *name, const char *row)
{
	return (name[1] | 0x20) == (row[1] | 0x20) && strcasecmp(name, row) == 0;
}

/* The DDL command a name spells compared without case (the index cache
 * would rather forget too much than keep a stale list); CMD_NONE when none.
 * Inline, on every forwarded request: a name of a letter without DDL costs
 * one load. */
static inline cmd_id cmd_find_ddl(const char *name)
{
	if (!name)
		return CMD_NONE;
	unsigned i = ((unsigned char)name[0] | 0x20) - (unsigned)'a';
	if (i >= CMD_LETTERS || !cmd_letters[i].ddl)
		return CMD_NONE;
	for (unsigned id = cmd_letters[i].first; id < cmd_letters[i].end; id++) {
		cmd_id c = cmd_rows[id].alias_of ? cmd_rows[id].alias_of : (cmd_id)id;
		if (cmd_rows[c].kind == CMD_KIND_DDL && cmd_name_caseeq(name, cmd_rows[id].name))
			return c;
	}
	return CMD_NONE;
}

/* What a key of a command body or statement, or a sequence's id, is to
 * some row: its filter, its update, or its statement sequence of either
 * kind. The capture keeps each in its own way. */
typedef enum {
	CMD_KEY_OTHER,
	CMD_KEY_FILTER,
	CMD_KEY_UPDATE,
	CMD_KEY_STATEMENTS, /* a sequence of CMD_SEQ_STATEMENTS */
	CMD_KEY_DOCUMENTS,  /* a sequence of CMD_SEQ_DOCUMENTS */
} cmd_key_role;

cmd_key_role cmd_key_role_of(const char *key);

#endif
