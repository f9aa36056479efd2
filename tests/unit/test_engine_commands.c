/* The command table (analyzers/engine/commands.c): every row found by its name
 * and alias and nothing else, the DDL lookup without case, explain of each
 * kind a row says can be explained, the shapes engine_shape() makes from
 * the rows, and one answer to "can this rule block" (rule_can_block) for
 * every engine question that depends on it. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <ctype.h>

#include "analyzers/engine/commands.h"
#include "analyzers/engine/shape.h"
#include "fixtures/analyzer_fixture.h"

#define RE_I "{'$regularExpression':{'pattern':'SECRET','options':'i'}}"

static size_t nrows(void)
{
	size_t n = 0;
	while (commands_at(n))
		n++;
	return n;
}

static void upper(const char *s, char *out, size_t cap)
{
	size_t i = 0;
	for (; s[i] && i + 1 < cap; i++)
		out[i] = (char)toupper((unsigned char)s[i]);
	out[i] = '\0';
}

static void test_rows_found_by_name_and_alias(void **state)
{
	size_t n = nrows();
	assert_true(n >= 12);
	for (size_t i = 0; i < n; i++) {
		const command_def *c = commands_at(i);
		assert_true(islower((unsigned char)command_name(c)[0]));
		assert_ptr_equal(commands_find(command_name(c)), c);
		for (unsigned id = CMD_NONE + 1; id < CMD_IDS; id++)
			if (cmd_rows[id].alias_of == command_id(c))
				assert_ptr_equal(commands_find(cmd_rows[id].name), c);
		/* a row explain can wrap has an analyser; a statement row a sequence */
		if (c->explainable)
			assert_non_null(c->analyze);
		if (c->shape == CMD_SHAPE_FIRST_STMT)
			assert_non_null(command_stmts(c));
		/* no two rows share a name */
		for (size_t j = 0; j < i; j++)
			assert_string_not_equal(command_name(commands_at(j)), command_name(c));
	}
	assert_null(commands_at(n));
	assert_string_equal(command_name(commands_find("findandmodify")), "findAndModify");
	assert_string_equal(command_name(commands_find("deleteIndexes")), "dropIndexes");
}

static void test_unknown_commands(void **state)
{
	const char *unknown[] = {"",     "hello", "ping", "getMore", "isMaster",       "Find",
	                         "FIND", "finds", "fin",  "f",       "findAndModifyX", "Insert",
	                         "_id",  "\xff",  "{",    "`",       "endSessions",    "commit"};
	assert_null(commands_find(NULL));
	assert_null(commands_find_ddl(NULL));
	for (size_t i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++) {
		assert_null(commands_find(unknown[i]));
		assert_null(commands_find_ddl(unknown[i]));
	}
}

/* Each row is its shared row's (protocol/commands.h): the engine reads
 * the commands that table knows, and only through their ids. */
static void test_rows_by_shared_id(void **state)
{
	size_t n = 0;
	for (unsigned id = CMD_NONE + 1; id < CMD_IDS; id++) {
		const command_def *c = commands_of((cmd_id)id);
		if (!c)
			continue;
		n++;
		assert_int_equal(command_id(c), id);
		assert_int_equal(cmd_rows[id].alias_of, CMD_NONE);
		assert_int_equal(c->ddl != DDL_NONE, cmd_rows[id].kind == CMD_KIND_DDL);
	}
	assert_int_equal(n, nrows());
	assert_null(commands_of(CMD_NONE));
}

/* DDL: names and aliases without case, only rows with a ddl kind. */
static void test_ddl_lookup(void **state)
{
	size_t nddl = 0;
	for (size_t i = 0; commands_at(i); i++) {
		const command_def *c = commands_at(i);
		char up[64];
		upper(command_name(c), up, sizeof(up));
		if (c->ddl == DDL_NONE) {
			assert_null(commands_find_ddl(command_name(c)));
			assert_null(commands_find_ddl(up));
			continue;
		}
		nddl++;
		assert_ptr_equal(commands_find_ddl(command_name(c)), c);
		assert_ptr_equal(commands_find_ddl(up), c);
		assert_null(commands_find(up)); /* analysis is case-sensitive */
		for (unsigned id = CMD_NONE + 1; id < CMD_IDS; id++)
			if (cmd_rows[id].alias_of == command_id(c)) {
				upper(cmd_rows[id].name, up, sizeof(up));
				assert_ptr_equal(commands_find_ddl(up), c);
			}
	}
	assert_int_equal(nddl, 9); /* ten names: dropIndexes has an alias */
	const char *ddl_names[] = {"createIndexes",    "dropIndexes",
	                           "deleteIndexes",    "drop",
	                           "collMod",          "create",
	                           "convertToCapped",  "dropDatabase",
	                           "renameCollection", "cloneCollectionAsCapped"};
	for (size_t i = 0; i < sizeof(ddl_names) / sizeof(ddl_names[0]); i++)
		assert_non_null(commands_find_ddl(ddl_names[i]));
	assert_int_equal(commands_find_ddl("DeleteIndexes")->ddl, DDL_COLL);
	assert_int_equal(commands_find_ddl("dropdatabase")->ddl, DDL_DATABASE);
	assert_int_equal(commands_find_ddl("RENAMECOLLECTION")->ddl, DDL_RENAME);
	assert_int_equal(commands_find_ddl("cloneCollectionAsCapped")->ddl, DDL_CLONE);
	assert_null(commands_find_ddl("drops"));
	assert_null(commands_find_ddl("dro"));
}

/* One request per explainable row, with a case-insensitive regex in what
 * it filters; a new explainable row without one here fails the test. */
typedef struct explain_case {
	const char *name, *db, *inner;
} explain_case;

static const explain_case explain_cases[] = {
    {"find", "test", "{'find':'users','filter':{'n':" RE_I "}}"},
    {"findAndModify", "test", "{'findAndModify':'users','query':{'n':" RE_I "},'remove':true}"},
    {"count", "test", "{'count':'users','query':{'n':" RE_I "}}"},
    {"distinct", "test", "{'distinct':'users','key':'k','query':{'n':" RE_I "}}"},
    {"aggregate", "test", "{'aggregate':'users','pipeline':[{'$match':{'n':" RE_I "}}]}"},
    {"update", "test", "{'update':'users','updates':[{'q':{'n':" RE_I "},'u':{'$set':{'a':1}}}]}"},
    {"delete", "test", "{'delete':'users','deletes':[{'q':{'n':" RE_I "},'limit':1}]}"},
    {"bulkWrite", "admin",
     "{'bulkWrite':1,'ops':[{'delete':0,'filter':{'n':" RE_I
     "},'multi':false}],'nsInfo':[{'ns':'test.users'}]}"},
};

static const explain_case *explain_case_of(const char *name)
{
	for (size_t i = 0; i < sizeof(explain_cases) / sizeof(explain_cases[0]); i++)
		if (strcmp(explain_cases[i].name, name) == 0)
			return &explain_cases[i];
	return NULL;
}

static engine *blocking_engine(fx_sink *sink)
{
	engine_config cfg;
	rule_config_defaults(&cfg);
	for (int r = 0; r < RULE_COUNT; r++)
		cfg.rules[r].action = RULE_BLOCK;
	return engine_new(&cfg, NULL, fx_sink_fn, sink);
}

static void check_explained(const command_def *c, const explain_case *x, fx_sink *sink)
{
	char req[1024];
	block_info b = {0};
	engine *e = blocking_engine(sink);
	/* run: blocked by the regex rule, so the row's analyser reads it */
	assert_int_equal(fx_analyze(e, x->db, x->inner, NULL, 0, NULL, &b), VERDICT_BLOCK);
	assert_int_equal(b.rule, RULE_CASE_INSENSITIVE_REGEX);
	engine_free(e);
	/* explained: the same analysis, at most logged, named explain */
	e = blocking_engine(sink);
	fx_sink_clear(sink);
	snprintf(req, sizeof(req), "{'explain':%s,'verbosity':'queryPlanner'}", x->inner);
	assert_int_equal(fx_analyze(e, x->db, req, NULL, 0, NULL, &b), VERDICT_FORWARD);
	assert_int_equal(fx_sink_count(sink, RULE_CASE_INSENSITIVE_REGEX), 1);
	const fx_finding *f = fx_sink_first(sink, RULE_CASE_INSENSITIVE_REGEX);
	assert_int_equal(f->action, RULE_LOG);
	assert_string_equal(f->command, "explain");
	assert_non_null(strstr(f->shape, command_name(c)));
	engine_free(e);
}

static void test_explain_each_kind(void **state)
{
	fx_sink sink;
	fx_sink_init(&sink);
	size_t nexplained = 0;
	for (size_t i = 0; commands_at(i); i++) {
		const command_def *c = commands_at(i);
		if (c->explainable) {
			const explain_case *x = explain_case_of(command_name(c));
			assert_non_null(x);
			check_explained(c, x, &sink);
			nexplained++;
			continue;
		}
		/* never analysed under explain, whatever it holds */
		char req[512];
		snprintf(req, sizeof(req),
		         "{'explain':{'%s':'users','filter':{'n':" RE_I
		         "},'pipeline':[{'$match':{'n':" RE_I "}}]}}",
		         command_name(c));
		engine *e = blocking_engine(&sink);
		fx_sink_clear(&sink);
		block_info b = {0};
		assert_int_equal(fx_analyze(e, "test", req, NULL, 0, NULL, &b), VERDICT_FORWARD);
		assert_int_equal(sink.n, 0);
		engine_free(e);
	}
	assert_int_equal(nexplained, sizeof(explain_cases) / sizeof(explain_cases[0]));
	fx_sink_free(&sink);
}

/* A row without an analyser is forwarded unread, as an unknown command. */
static void test_rows_without_analyser(void **state)
{
	fx_sink sink;
	fx_sink_init(&sink);
	engine *e = blocking_engine(&sink);
	block_info b = {0};
	for (size_t i = 0; commands_at(i); i++) {
		const command_def *c = commands_at(i);
		if (c->analyze)
			continue;
		char req[512];
		snprintf(req, sizeof(req),
		         "{'%s':'users','filter':{'n':" RE_I "},'pipeline':[{'$match':{'n':" RE_I
		         "}}]}",
		         command_name(c));
		assert_int_equal(fx_analyze(e, "test", req, NULL, 0, NULL, &b), VERDICT_FORWARD);
	}
	assert_int_equal(sink.n, 0);
	engine_free(e);
	fx_sink_free(&sink);
}

static void shape_of(const char *db, const char *json, char *ns, char *cmd, char *shape)
{
	fx_req r;
	assert_true(fx_req_build(&r, db, json, NULL, 0));
	uint64_t h;
	assert_true(engine_shape(&r.v, ns, 256, cmd, 64, shape, &h));
	fx_req_free(&r);
}

static bool shown_values(const char *json)
{
	fx_req r;
	char ns[256], cmd[64], shape[SHAPE_BUF_LEN];
	uint64_t h;
	bool values = false;
	assert_true(fx_req_build(&r, "test", json, NULL, 0));
	assert_true(engine_shape_values(&r.v, ns, 256, cmd, 64, shape, &h, &values));
	fx_req_free(&r);
	return values;
}

/* engine_shape_values() says when the shape (or whether it is an explain)
 * was read from a number, a date, an ObjectId or a timestamp: the values a
 * request template leaves free, which the workload may then not reuse a
 * shape across. */
static void test_shape_values(void **state)
{
	assert_false(shown_values("{'find':'u','filter':{'_id':5,'t':{'$date':5}},'limit':1}"));
	assert_false(shown_values("{'find':'u','filter':{'a':{'$gt':2.5}},'sort':{'b':'x'}}"));
	assert_false(
	    shown_values("{'update':'u','updates':[{'q':{'_id':1},'u':{'$inc':{'n':1}}}]}"));
	assert_false(shown_values("{'find':'u','filter':{},'explain':true}"));
	assert_true(shown_values("{'find':'u','filter':{'a':1},'sort':{'b':1}}"));
	assert_true(shown_values("{'find':'u','filter':{'a':1},'hint':{'a':{'$numberLong':'1'}}}"));
	assert_true(shown_values("{'aggregate':'u','pipeline':[],'explain':1}"));
	assert_false(shown_values("{'aggregate':'u','pipeline':[],'explain':true}"));
	assert_true(shown_values("{'aggregate':'u','pipeline':[{'$sort':{'a':-1}}],'cursor':{}}"));
}

/* engine_shape() as each row's shape kind says. */
static void test_shapes_by_row(void **state)
{
	char ns[256], cmd[64], shape[SHAPE_BUF_LEN];
	shape_of("test", "{'find':'users','filter':{'a':1},'sort':{'b':1}}", ns, cmd, shape);
	assert_string_equal(ns, "test.users");
	assert_string_equal(cmd, "find");
	assert_string_equal(
	    shape, "{\"find\":\"users\",\"filter\":{\"a\":\"?number\"},\"sort\":{\"b\":1}}");
	shape_of("test", "{'findandmodify':'users','query':{'a':1},'remove':true}", ns, cmd, shape);
	assert_string_equal(cmd, "findAndModify");
	shape_of("test", "{'aggregate':1,'pipeline':[],'explain':true}", ns, cmd, shape);
	assert_string_equal(ns, "test.$cmd.aggregate");
	assert_string_equal(cmd, "explain");
	shape_of("test", "{'update':'users','updates':[{'q':{'a':1},'u':{'$set':{'b':2}}}]}", ns,
	         cmd, shape);
	assert_non_null(strstr(shape, "\"q\":{\"a\":\"?number\"}"));
	shape_of("test", "{'explain':{'count':'users','query':{'a':1}}}", ns, cmd, shape);
	assert_string_equal(cmd, "explain");
	assert_non_null(strstr(shape, "{\"explain\":{\"count\":\"users\",\"query\""));
	/* the command alone: insert, and a DDL row shown as it was sent */
	shape_of("test", "{'insert':'users','documents':[{'a':1}]}", ns, cmd, shape);
	assert_string_equal(shape, "{\"insert\":\"users\"}");
	shape_of("test", "{'deleteIndexes':'users','index':'*'}", ns, cmd, shape);
	assert_string_equal(cmd, "deleteIndexes");
	shape_of("test", "{'ping':1}", ns, cmd, shape);
	assert_string_equal(ns, "test.$cmd");
	assert_string_equal(cmd, "ping");
}

/* rule_can_block is the one answer: its action or any scope's at block. */
static void test_rule_can_block(void **state)
{
	rule_config rc;
	memset(&rc, 0, sizeof(rc));
	rc.action = RULE_LOG;
	assert_false(rule_can_block(&rc));
	rc.action = RULE_BLOCK;
	assert_true(rule_can_block(&rc));
	rc.action = RULE_DRY_RUN;
	rc.nscopes = 3;
	rc.scopes[0].action = RULE_OFF;
	rc.scopes[1].action = RULE_DRY_RUN;
	assert_false(rule_can_block(&rc));
	rc.scopes[2].action = RULE_BLOCK;
	assert_true(rule_can_block(&rc));
	rc.nscopes = 2; /* only the scopes counted */
	assert_false(rule_can_block(&rc));
}

/* Each rule alone at block in its last scope: the engine's answers that
 * depend on whether the rule can block (engine_may_block, and a query
 * naming its collection by UUID) follow rule_can_block and what the rule
 * reads (a rule that reads nothing blocks nothing). */
static void test_block_questions_follow_rule_can_block(void **state)
{
	const char *uuid_find = "{'find':{'$binary':{'base64':'y9GbU9sHQx+y+ySor8crog==',"
	                        "'subType':'04'}},'filter':{}}";
	for (int r = 0; r < RULE_COUNT; r++) {
		engine_config cfg;
		rule_config_defaults(&cfg);
		rule_config *rc = &cfg.rules[r];
		rc->nscopes = 2;
		rc->scopes[0].action = RULE_LOG;
		rc->scopes[1].action = RULE_BLOCK;
		snprintf(rc->scopes[1].namespaces[0], RULE_PATTERN_LEN, "elsewhere.*");
		rc->scopes[1].nnamespaces = 1;
		assert_true(rule_can_block(rc));
		const rule_checks *k = rule_table[r]->checks;
		bool reads_query = k->filter || k->sort || k->query;
		/* a rule that reads no part (it follows a connection's reads:
		 * client-side-join) never blocks, whatever its action */
		bool reads_any = reads_query || k->update || k->pipeline || k->document;
		engine *e = engine_new(&cfg, NULL, NULL, NULL);
		block_info b = {0};
		assert_int_equal(engine_may_block(e, "find"), reads_any);
		assert_int_equal(engine_may_block(e, NULL), reads_any);
		assert_int_equal(engine_may_block(e, "insert"), k->document != NULL);
		assert_int_equal(fx_analyze(e, "shop", uuid_find, NULL, 0, NULL, &b),
		                 reads_query ? VERDICT_BLOCK : VERDICT_FORWARD);
		if (reads_query)
			assert_int_equal(b.rule, r);
		engine_free(e);
		/* the same scope at dry-run: nothing can block */
		rc->scopes[1].action = RULE_DRY_RUN;
		assert_false(rule_can_block(rc));
		e = engine_new(&cfg, NULL, NULL, NULL);
		assert_false(engine_may_block(e, "find"));
		assert_int_equal(fx_analyze(e, "shop", uuid_find, NULL, 0, NULL, &b),
		                 VERDICT_FORWARD);
		engine_free(e);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_rows_found_by_name_and_alias),
	    cmocka_unit_test(test_unknown_commands),
	    cmocka_unit_test(test_rows_by_shared_id),
	    cmocka_unit_test(test_ddl_lookup),
	    cmocka_unit_test(test_explain_each_kind),
	    cmocka_unit_test(test_rows_without_analyser),
	    cmocka_unit_test(test_shapes_by_row),
	    cmocka_unit_test(test_shape_values),
	    cmocka_unit_test(test_rule_can_block),
	    cmocka_unit_test(test_block_questions_follow_rule_can_block),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
