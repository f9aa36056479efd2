/* What analysis costs per request, for a typical mix of commands.
 *
 * Each command is a real OP_MSG parsed into a command view once; the loop
 * times engine_analyze() alone. Timings are taken over batches of BATCH
 * calls (a clock read per call would cost as much as the call), and the
 * median of the batch means is reported: per command, and for the mix run
 * interleaved. The index cache knows the collection's indexes and size, so
 * the sort and collection-scan rules do their full checks. After the mix,
 * large inserts (not part of the mix: they are what large-document reads,
 * built at start) are timed the same way. No pass/fail: the figures go
 * into reports.
 *
 *   bench_analyze [iterations-per-command]   (default 200000) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "analyzers/engine/engine.h"
#include "analyzers/catalog/index_cache.h"
#include "analyzers/planner/index_set.h"
#include "tests/unit/fixtures/analyzer_fixture.h"

#define BATCH 1000

typedef struct bench_cmd {
	const char *name;
	const char *json;
	fx_seq seq;
} bench_cmd;

static const bench_cmd cmds[] = {
    {"find by _id",
     "{'find':'orders','filter':{'_id':{'$oid':'0123456789abcdef01234567'}},"
     "'limit':1,'singleBatch':true,'lsid':{'id':{'$binary':{'base64':"
     "'AAAAAAAAAAAAAAAAAAAAAA==','subType':'04'}}}}",
     {NULL, {NULL}}},
    {"find filter+sort",
     "{'find':'orders','filter':{'status':'A','qty':{'$gt':5}},'sort':{"
     "'created':-1},'limit':20}",
     {NULL, {NULL}}},
    {"insert",
     "{'insert':'orders','ordered':true}",
     {"documents", {"{'_id':1,'status':'A','qty':3,'items':[{'sku':'x','n':1}]}"}}},
    {"update $set",
     "{'update':'orders','ordered':true}",
     {"updates",
      {"{'q':{'_id':1},'u':{'$set':{'status':'B','updated':{'$date':"
       "'2024-01-01T00:00:00Z'}},'$inc':{'v':1}}}"}}},
    {"aggregate $match/$group",
     "{'aggregate':'orders','pipeline':[{'$match':{'status':'A','created':{'$gte':{'$date':"
     "'2024-01-01T00:00:00Z'}}}},{'$group':{'_id':'$customer','total':{'$sum':'$amount'}}},"
     "{'$sort':{'total':-1}},{'$limit':10}],'cursor':{}}",
     {NULL, {NULL}}},
    {"find regex /i (finding)",
     "{'find':'users','filter':{'email':{'$regularExpression':{'pattern':'^ann','options':"
     "'i'}}}}",
     {NULL, {NULL}}},
    {"update $push (finding)",
     "{'update':'posts','ordered':true}",
     {"updates", {"{'q':{'_id':7},'u':{'$push':{'comments':{'by':'x','t':1}}}}"}}},
};
#define NCMDS (sizeof(cmds) / sizeof(cmds[0]))

/* Large inserts, generated: name, and the one document's JSON. */
typedef struct big_cmd {
	const char *name;
	char *doc;
} big_cmd;

/* head, then n items separated by sep, then tail. With keyed, each item
 * is preceded by a unique key 'f<i>': (an object's fields). */
static char *repeat_json(const char *head, const char *item, size_t n, const char *sep, bool keyed,
                         const char *tail)
{
	size_t len = strlen(head) + n * (strlen(item) + strlen(sep) + 32) + strlen(tail) + 1;
	char *out = malloc(len), *p = out;
	p += sprintf(p, "%s", head);
	for (size_t i = 0; i < n; i++) {
		if (i)
			p += sprintf(p, "%s", sep);
		if (keyed)
			p += sprintf(p, "'f%zu':", i);
		p += sprintf(p, "%s", item);
	}
	sprintf(p, "%s", tail);
	return out;
}

static uint64_t findings;

static void count_sink(void *arg, const finding *f)
{
	findings++;
}

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double *v, size_t n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The mix, interleaved: one call of each command per step. A function of
 * its own, so a profile can take it alone:
 *   valgrind --tool=callgrind --toggle-collect=run_mix build/bench_analyze 7000 */
static __attribute__((noinline)) void run_mix(engine *e, const fx_req *reqs, request_ctx *rc,
                                              block_info *block, double *means, size_t nbatches)
{
	for (size_t b = 0; b < nbatches; b++) {
		int64_t t0 = now_ns();
		for (int i = 0; i < BATCH; i++)
			engine_analyze(e, &reqs[i % NCMDS].v, rc, block);
		means[b] = (double)(now_ns() - t0) / BATCH;
	}
}

int main(int argc, char **argv)
{
	long iters = argc > 1 ? atol(argv[1]) : 200000;
	if (iters < BATCH)
		iters = BATCH;
	size_t nbatches = (size_t)iters / BATCH;

	index_cache *ic = fx_orders_cache();

	engine_config cfg;
	rule_config_defaults(&cfg);
	engine *e = engine_new(&cfg, ic, count_sink, NULL);
	static fx_req reqs[NCMDS];
	for (size_t c = 0; c < NCMDS; c++)
		if (!fx_req_build(&reqs[c], "shop", cmds[c].json,
		                  cmds[c].seq.id ? &cmds[c].seq : NULL, cmds[c].seq.id ? 1 : 0))
			return 1;
	/* A connection's track, as the proxy passes it: every read is described
	 * to client-side-join (engine.h, engine_conn_track). */
	engine_conn_track *track = NULL;
	request_ctx rc = {
	    .app_name = "bench", .client = "127.0.0.1:1", .now_ms = 1, .track = &track};
	block_info block;
	double *means = calloc(nbatches, sizeof(double));
	double per_cmd[NCMDS];

	/* warm-up: first occurrences, cache lines, branch predictors */
	for (size_t c = 0; c < NCMDS; c++)
		for (int i = 0; i < 1000; i++)
			engine_analyze(e, &reqs[c].v, &rc, &block);

	printf("engine_analyze, %ld iterations per command, median of %zu batch means of %d "
	       "calls\n\n",
	       (long)nbatches * BATCH, nbatches, BATCH);
	for (size_t c = 0; c < NCMDS; c++) {
		for (size_t b = 0; b < nbatches; b++) {
			int64_t t0 = now_ns();
			for (int i = 0; i < BATCH; i++)
				engine_analyze(e, &reqs[c].v, &rc, &block);
			means[b] = (double)(now_ns() - t0) / BATCH;
		}
		per_cmd[c] = median(means, nbatches);
		printf("  %-28s %8.1f ns\n", cmds[c].name, per_cmd[c]);
	}

	run_mix(e, reqs, &rc, &block, means, nbatches);
	double mix = median(means, nbatches);
	double cmd_median = median(per_cmd, NCMDS);
	printf("\n  %-28s %8.1f ns\n", "mix, interleaved", mix);
	printf("  %-28s %8.1f ns\n", "median of command medians", cmd_median);
	engine_flush_summaries(e);

	/* Large inserts: what large-document costs on the documents it reads. */
	big_cmd big[] = {
	    /* over maxBytes: the header says so; the finding repeats */
	    {"insert 2.5 MB string (finding)",
	     repeat_json("{'_id':1,'blob':'", "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", 62500, "",
	                 false, "'}")},
	    /* under maxBytes, walked: 8,000 fields, strings skipped by length */
	    {"insert 1 MB, 8000 fields (walked)",
	     repeat_json(
	         "{",
	         "'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
	         "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx'",
	         8000, ",", true, "}")},
	    /* an array over maxArrayLength: counted; the finding repeats */
	    {"insert 5000-element array (finding)",
	     repeat_json("{'a':[", "7", 5000, ",", false, "]}")},
	};
	printf("\n");
	for (size_t c = 0; c < sizeof(big) / sizeof(big[0]); c++) {
		fx_seq seq = {"documents", {big[c].doc}};
		fx_req r;
		if (!fx_req_build(&r, "shop", "{'insert':'orders','ordered':true}", &seq, 1))
			return 1;
		size_t n = nbatches / 10 ? nbatches / 10 : 1; /* these are slower */
		for (int i = 0; i < 10; i++)
			engine_analyze(e, &r.v, &rc, &block);
		for (size_t b = 0; b < n; b++) {
			int64_t t0 = now_ns();
			for (int i = 0; i < BATCH / 10; i++)
				engine_analyze(e, &r.v, &rc, &block);
			means[b] = (double)(now_ns() - t0) / (BATCH / 10);
		}
		printf("  %-36s %10.1f ns  (%zu bytes)\n", big[c].name, median(means, n), r.len);
		fx_req_free(&r);
		free(big[c].doc);
	}
	printf("\n  findings sent to the sink: %llu (first occurrences and summaries)\n",
	       (unsigned long long)findings);

	free(means);
	for (size_t c = 0; c < NCMDS; c++)
		fx_req_free(&reqs[c]);
	engine_free(e);
	engine_conn_track_free(track);
	index_cache_free(ic);
	return 0;
}
