/* One command table (protocol/commands.h) for the whole tree: a command
 * known in one place only fails here. The shared rows are checked against
 * themselves (lookup runs, aliases, kinds), the engine's columns against
 * the shared rows, and each reader by what it does with every row: the
 * metrics' label, the report's reads and statements, the capture's
 * redaction. Linked with mgproxy, which holds all of them. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <ctype.h>

#include "analyzers/engine/commands.h"
#include "fixtures/analyzer_fixture.h"
#include "protocol/capture.h"
#include "protocol/commands.h"
#include "protocol/request.h"
#include "proxy/admin/metrics.h"
#include "report/aggregate.h"
#include "report/aggregate_parts.h"
#include "report/housekeeping.h"
#include "report/namespaces.h"

/* The canonical id a row stands for (itself, or the command it spells). */
static cmd_id canon(unsigned id)
{
	return cmd_rows[id].alias_of ? cmd_rows[id].alias_of : (cmd_id)id;
}

/* ---- the shared rows ---- */

/* Each letter's run holds exactly the ids of that letter, in id order, and
 * its ddl flag says whether one of them spells a DDL command. */
static void test_letter_runs(void **state)
{
	unsigned next = CMD_NONE + 1;
	for (unsigned l = 0; l < CMD_LETTERS; l++) {
		const cmd_letter *g = &cmd_letters[l];
		if (g->first == CMD_NONE && g->end == CMD_NONE) {
			assert_false(g->ddl);
			continue;
		}
		assert_int_equal(g->first, next);
		assert_true(g->end > g->first);
		bool ddl = false;
		for (unsigned id = g->first; id < g->end; id++) {
			assert_int_equal(cmd_rows[id].name[0], 'a' + (int)l);
			ddl |= cmd_rows[canon(id)].kind == CMD_KIND_DDL;
		}
		assert_int_equal(g->ddl, ddl);
		next = g->end;
	}
	assert_int_equal(next, CMD_IDS);
}

static void test_every_row_found(void **state)
{
	for (unsigned id = CMD_NONE + 1; id < CMD_IDS; id++) {
		const cmd_row *r = &cmd_rows[id];
		assert_non_null(r->name);
		assert_int_equal(cmd_find(r->name), canon(id));
		for (unsigned j = CMD_NONE + 1; j < id; j++)
			assert_string_not_equal(cmd_rows[j].name, r->name);
		/* an alias is a spelling only: the command's row says the rest */
		if (r->alias_of) {
			assert_true(r->alias_of < CMD_IDS);
			assert_int_equal(cmd_rows[r->alias_of].alias_of, CMD_NONE);
			assert_int_equal(r->kind, CMD_KIND_OTHER);
			assert_null(r->stmts);
			assert_null(r->filter);
			assert_null(r->update);
			assert_false(r->credentials);
			assert_false(r->housekeeping);
			assert_int_equal(r->label, CMD_LABEL_OTHER);
		}
		assert_int_equal(r->stmts != NULL, r->seq != CMD_SEQ_NONE);
		/* the DDL lookup: without case, DDL commands only */
		char up[64];
		size_t i = 0;
		for (; r->name[i] && i + 1 < sizeof up; i++)
			up[i] = (char)toupper((unsigned char)r->name[i]);
		up[i] = '\0';
		cmd_id ddl = cmd_rows[canon(id)].kind == CMD_KIND_DDL ? canon(id) : CMD_NONE;
		assert_int_equal(cmd_find_ddl(r->name), ddl);
		assert_int_equal(cmd_find_ddl(up), ddl);
	}
	const char *unknown[] = {"", "Find", "finds", "fin", "f", "isMaste", "hello2", "\xff", "{"};
	assert_int_equal(cmd_find(NULL), CMD_NONE);
	assert_int_equal(cmd_find_ddl(NULL), CMD_NONE);
	for (size_t i = 0; i < sizeof unknown / sizeof *unknown; i++) {
		assert_int_equal(cmd_find(unknown[i]), CMD_NONE);
		assert_int_equal(cmd_find_ddl(unknown[i]), CMD_NONE);
	}
	assert_int_equal(cmd_find("isMaster"), CMD_HELLO);
	assert_int_equal(cmd_find_ddl("DELETEINDEXES"), CMD_DROP_INDEXES);
}

/* ---- the engine's columns ---- */

/* Every command the engine reads is a shared row of the kind its columns
 * say, and every read, write or DDL row has the engine's column. */
static void test_engine_rows_match(void **state)
{
	size_t n = 0;
	for (size_t i = 0; commands_at(i); i++, n++) {
		const command_def *c = commands_at(i);
		const cmd_row *r = command_row(c);
		assert_int_equal(r->alias_of, CMD_NONE);
		assert_int_equal(c->ddl != DDL_NONE, r->kind == CMD_KIND_DDL);
		/* a command asks the scan rule about its own filter, if any */
		if (c->query != RULE_QUERY_NONE) {
			assert_int_equal((int)c->query, (int)command_id(c));
			assert_true(r->kind == CMD_KIND_READ || r->kind == CMD_KIND_WRITE);
		}
		if (r->kind == CMD_KIND_READ)
			assert_int_not_equal(c->query, RULE_QUERY_NONE);
		if (c->shape == CMD_SHAPE_FIRST_STMT || c->stmt_keys)
			assert_int_equal(r->seq, CMD_SEQ_STATEMENTS);
		if (c->parts == PART_DOCUMENT) /* insert: read only by document checks */
			assert_int_equal(r->seq, CMD_SEQ_DOCUMENTS);
	}
	size_t want = 0;
	for (unsigned id = CMD_NONE + 1; id < CMD_IDS; id++) {
		const cmd_row *r = &cmd_rows[id];
		if (r->alias_of || r->kind == CMD_KIND_OTHER)
			continue;
		want++;
		assert_non_null(commands_of((cmd_id)id));
	}
	/* explain is the one row of kind other the engine reads */
	assert_int_equal(n, want + 1);
	assert_non_null(commands_of(CMD_EXPLAIN));
}

/* ---- the metrics ---- */

static bool group_label(cmd_label l)
{
	return l == CMD_LABEL_AUTH || l == CMD_LABEL_DDL || l == CMD_LABEL_OTHER;
}

/* Each spelling is counted under its command's label; a label of its own
 * is its row's name; every label has a row; every DDL command is "ddl". */
static void test_metrics_labels(void **state)
{
	unsigned rows_of[CMD_LABELS] = {0};
	for (unsigned id = CMD_NONE + 1; id < CMD_IDS; id++) {
		const cmd_row *c = &cmd_rows[canon(id)];
		assert_int_equal(mx_command_of(cmd_rows[id].name), c->label);
		assert_int_equal(c->kind == CMD_KIND_DDL, c->label == CMD_LABEL_DDL);
		if (cmd_rows[id].alias_of)
			continue;
		rows_of[c->label]++;
		if (!group_label(c->label))
			assert_string_equal(mx_command_name(c->label), c->name);
	}
	for (unsigned l = CMD_LABEL_OTHER + 1; l < CMD_LABELS; l++) {
		assert_true(rows_of[l] >= 1);
		if (!group_label((cmd_label)l))
			assert_int_equal(rows_of[l], 1);
	}
	assert_int_equal(mx_command_of(NULL), CMD_LABEL_OTHER);
	assert_int_equal(mx_command_of("someNewCommand"), CMD_LABEL_OTHER);
	/* counted as "other" before the table was shared */
	assert_int_equal(mx_command_of("convertToCapped"), CMD_LABEL_DDL);
	assert_int_equal(mx_command_of("cloneCollectionAsCapped"), CMD_LABEL_DDL);
	assert_int_equal(mx_command_of("deleteIndexes"), CMD_LABEL_DDL);
	assert_string_equal(mx_command_name(CMD_LABEL_OTHER), "other");
}

/* Each label once in the exposition, "other" last. */
static void test_metrics_exposition(void **state)
{
	static char out[64 * 1024];
	atomic_uint conns = 0;
	metrics *m = metrics_new(1, &conns, "0");
	text_buf t;
	text_init(&t, out, sizeof out);
	metrics_render(m, &t);
	const char *text = text_finish(&t);
	const char *last = text;
	for (unsigned l = CMD_LABEL_OTHER + 1; l <= CMD_LABELS; l++) {
		char line[128];
		snprintf(line, sizeof line, "mongoguard_commands_total{command=\"%s\"} 0\n",
		         mx_command_name((cmd_label)(l % CMD_LABELS)));
		const char *at = strstr(text, line);
		assert_non_null(at);
		assert_true(at > last);
		assert_null(strstr(at + 1, line));
		last = at;
	}
	metrics_free(m);
}

/* ---- the report ---- */

/* A read row is counted as a read of its collection; the filter of a
 * statement row's statements is noted as a used field. */
static void test_report_reads_and_statements(void **state)
{
	model m;
	memset(&m, 0, sizeof m);
	ns_table t = {.m = &m};
	for (unsigned id = CMD_NONE + 1; id < CMD_IDS; id++) {
		const cmd_row *r = &cmd_rows[id];
		if (r->alias_of)
			continue;
		char body[256], ns[64];
		snprintf(body, sizeof body, "{'%s':'c%u'}", r->name, id);
		snprintf(ns, sizeof ns, "test.c%u", id);
		char stmt[64];
		snprintf(stmt, sizeof stmt, "{'%s':{'stmtField':1}}", r->filter ? r->filter : "q");
		fx_seq seq = {.id = r->stmts ? r->stmts : "none", .docs = {stmt}};
		fx_req q;
		assert_true(fx_req_build(&q, "test", body, &seq, 1));
		model_ns *n = ns_table_get(&t, ns);
		agg_note_schema(&t, n, &q.v, r->name);
		n = ns_table_get(&t, ns);
		assert_int_equal(n->reads, r->kind == CMD_KIND_READ ? 1 : 0);
		bool noted = n->nused == 1 && !strcmp(n->used[0].path, "stmtField");
		assert_int_equal(noted, r->seq == CMD_SEQ_STATEMENTS && r->filter);
		fx_req_free(&q);
	}
	ns_table_free(&t);
	model_free(&m);
}

/* What drivers and shells send on their own is housekeeping in every
 * spelling, counted by the report under its command's name; no read,
 * write or DDL command is; and mongosh's read of admin.atlascli is too. */
static void test_report_housekeeping(void **state)
{
	static const char *const hk[] = {
	    "hello",          "isMaster",     "ismaster", "buildInfo",    "buildinfo",
	    "getParameter",   "atlasVersion", "ping",     "endSessions",  "saslStart",
	    "saslContinue",   "authenticate", "getLog",   "hostInfo",     "connectionStatus",
	    "getCmdLineOpts", "whatsmyuri",   "logout",   "listDatabases"};
	for (size_t i = 0; i < sizeof hk / sizeof *hk; i++) {
		cmd_id id = cmd_find(hk[i]);
		assert_int_not_equal(id, CMD_NONE);
		assert_true(cmd_rows[id].housekeeping);
		assert_string_equal(report_housekeeping(hk[i], "admin.$cmd"), cmd_rows[id].name);
	}
	for (unsigned id = CMD_NONE + 1; id < CMD_IDS; id++)
		if (cmd_rows[id].housekeeping)
			assert_int_equal(cmd_rows[id].kind, CMD_KIND_OTHER);
	static const char *const app[] = {"find",        "aggregate",     "getMore",
	                                  "killCursors", "insert",        "explain",
	                                  "count",       "createIndexes", "someNewCommand"};
	for (size_t i = 0; i < sizeof app / sizeof *app; i++)
		assert_null(report_housekeeping(app[i], "shop.orders"));
	assert_string_equal(report_housekeeping("find", "admin.atlascli"), "admin.atlascli");
	assert_null(report_housekeeping("find", "admin.atlascli2"));
	/* their metrics label is unchanged: counted as "other" before they had rows */
	assert_int_equal(mx_command_of("buildInfo"), CMD_LABEL_OTHER);
	assert_int_equal(mx_command_of("hello"), CMD_LABEL_HELLO);
}

/* ---- the capture ---- */

static bool has_field(const bson_t *rec, const char *path)
{
	bson_iter_t it;
	return bson_iter_init(&it, rec) && bson_iter_find_descendant(&it, path, &it);
}

static bool holds(const bson_t *doc, const char *s)
{
	char *j = bson_as_relaxed_extended_json(doc, NULL);
	bool found = strstr(j, s) != NULL;
	bson_free(j);
	return found;
}

/* A command with a credential is stored redacted with redaction off; any
 * other is stored whole. */
static void test_capture_credentials(void **state)
{
	capture_origin o = {.t_us = 1, .conn = 1, .client = "c", .app = "a"};
	for (unsigned id = CMD_NONE + 1; id < CMD_IDS; id++) {
		char body[256];
		snprintf(body, sizeof body, "{'%s':'c','x':'secret'}", cmd_rows[id].name);
		fx_req q;
		assert_true(fx_req_build(&q, "test", body, NULL, 0));
		request r;
		wire_error err = {0};
		assert_int_equal(request_decode(&r, q.msg, q.len, &err), REQUEST_COMMAND);
		bson_t rec;
		capture_build_request(&rec, &o, &r, false, NULL);
		assert_int_equal(has_field(&rec, "msg"), !cmd_rows[canon(id)].credentials);
		bson_destroy(&rec);
		request_release(&r);
		fx_req_free(&q);
	}
}

/* Redacted: a row's filter keeps its operators' names ($type's argument
 * is structure), its update keeps a pipeline's field paths, its statements
 * are statements, and an insert's documents are measured, not stored. */
static void test_capture_redaction(void **state)
{
	capture_origin o = {.t_us = 1, .conn = 1, .client = "c", .app = "a"};
	for (unsigned id = CMD_NONE + 1; id < CMD_IDS; id++) {
		const cmd_row *r = &cmd_rows[id];
		char body[512];
		if (r->alias_of)
			continue;
		if (r->filter || r->update) {
			char stmt[256];
			snprintf(stmt, sizeof stmt,
			         "{'%s':{'f':{'$type':'string'}},'%s':[{'$set':{'g':'$h'}}]}",
			         r->filter ? r->filter : "nofilter",
			         r->update ? r->update : "noupdate");
			bson_t *doc = fx_json(stmt), out;
			capture_redact_statement(doc, false, &out);
			assert_int_equal(holds(&out, "string"), r->filter != NULL);
			assert_int_equal(holds(&out, "$h"), r->update != NULL);
			bson_destroy(&out);
			bson_destroy(doc);
		}
		if (!r->stmts)
			continue;
		snprintf(body, sizeof body, "{'%s':'c','%s':[{'%s':{'f':{'$type':'string'}}}]}",
		         r->name, r->stmts, r->filter ? r->filter : "q");
		bson_t *doc = fx_json(body), out;
		capture_redact_command(doc, &out);
		assert_int_equal(holds(&out, "string"), r->seq == CMD_SEQ_STATEMENTS);
		bson_destroy(&out);
		bson_destroy(doc);
		/* as a kind-1 sequence */
		snprintf(body, sizeof body, "{'%s':'c'}", r->name);
		fx_seq seq = {.id = r->stmts, .docs = {"{'k':'secret','q':{'f':1}}"}};
		fx_req q;
		assert_true(fx_req_build(&q, "test", body, &seq, 1));
		request rq;
		wire_error err = {0};
		assert_int_equal(request_decode(&rq, q.msg, q.len, &err), REQUEST_COMMAND);
		bson_t rec;
		char path[64];
		capture_build_request(&rec, &o, &rq, true, NULL);
		snprintf(path, sizeof path, "seqs.%s.0.k", r->stmts);
		assert_int_equal(has_field(&rec, path), r->seq == CMD_SEQ_STATEMENTS);
		assert_false(holds(&rec, "secret"));
		bson_destroy(&rec);
		request_release(&rq);
		fx_req_free(&q);
	}
	assert_int_equal(cmd_key_role_of("explain"), CMD_KEY_OTHER);
	assert_int_equal(cmd_key_role_of("documents"), CMD_KEY_DOCUMENTS);
	assert_int_equal(cmd_key_role_of("ops"), CMD_KEY_STATEMENTS);
	assert_int_equal(cmd_key_role_of("arrayFilters"), CMD_KEY_OTHER);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_letter_runs),
	    cmocka_unit_test(test_every_row_found),
	    cmocka_unit_test(test_engine_rows_match),
	    cmocka_unit_test(test_metrics_labels),
	    cmocka_unit_test(test_metrics_exposition),
	    cmocka_unit_test(test_report_reads_and_statements),
	    cmocka_unit_test(test_report_housekeeping),
	    cmocka_unit_test(test_capture_credentials),
	    cmocka_unit_test(test_capture_redaction),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
