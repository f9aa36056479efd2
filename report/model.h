/* What the report knows once every capture is read: the numbers the three
 * writers (html.c, json.c, md.c) render. Built by aggregate.c; plain data
 * with growable arrays, owned by the model. */
#ifndef MG_REPORT_MODEL_H
#define MG_REPORT_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "analyzers/rules/rules.h"

#define MODEL_SHAPE_LEN        2048
#define MODEL_NS_LEN           256
#define MODEL_APPS_PER_FINDING 8
#define MODEL_BLOAT_BUCKETS    7 /* <1K, <16K, <128K, <1M, <4M, <16M, >=16M */
#define MODEL_ERROR_CODES      4 /* error codes kept per shape */

typedef struct model_input {
	char path[1024];
	char mongoguard[32];
	char redaction[16];
	bool no_value_hashes; /* its header says valueHashes: false (capture.h) */
	int64_t start_us;
	uint64_t records;
	bool refused; /* unreadable, or a version this reader does not know */
	bool truncated;
	uint64_t stopped_at; /* byte offset of the first unread record */
	char problem[512];
} model_input;

typedef struct model_shape {
	uint64_t hash;
	char ns[MODEL_NS_LEN];
	char command[64];
	char shape[MODEL_SHAPE_LEN];
	uint64_t count;
	int64_t *lat_us; /* one per paired reply */
	int64_t *lat_t;  /* its request's time, until aggregator_finish sorts lat_us */
	size_t nlat, caplat;
	int64_t total_us;
	uint64_t docs, bytes; /* returned */
	uint64_t errors;      /* failed replies: ok: 0, or writeErrors */
	/* The codes of the failures, most frequent first after
	 * aggregator_finish: the first MODEL_ERROR_CODES distinct codes seen,
	 * the rest counted in other_codes. */
	int32_t codes[MODEL_ERROR_CODES];
	uint64_t code_counts[MODEL_ERROR_CODES];
	size_t ncodes;
	uint64_t other_codes;
	bool mostly_fails; /* more than half its replies failed: its latency is no speed */
	unsigned rules;    /* bit per rule_id found on this shape */
	/* A rule that stays silent on small collections (rules.h, quiet_below)
	 * would have reported it with that parameter at 0 (aggregate.c asks
	 * again for collections under it): what scans once data grows. */
	unsigned quiet_rules;
	char app[128];        /* the first app seen */
	double p50, p95, p99; /* ms, after aggregator_finish */
	/* The workload (workload.c): the command table's kind of its command
	 * (protocol/commands.h, CMD_KIND_*), and of a read the fields its
	 * projection names (proj_fields -1: none, the whole document). */
	int kind;
	int proj_fields;
	char proj[256]; /* the projection's field names, comma-separated */
} model_shape;

#define MODEL_ARRAY_SAMPLES (1u << 20)
/* An array that never went past this, and did not grow from the first half
 * of the capture to the second, is labelled as seen only small: bounded
 * by the business (five addresses), not by the code. */
#define MODEL_ARRAY_SMALL 20

/* What sampled replies showed of the array a finding's write grows. */
typedef struct model_array_evidence {
	char path[128];
	uint64_t samples;     /* sampled replies that held it */
	int64_t largest, p95; /* elements */
	int64_t first_half,
	    second_half; /* largest in each half of the capture's time range; -1: none */
	int64_t growth;  /* second_half - first_half (0 when a half saw none) */
} model_array_evidence;

typedef struct model_finding {
	rule_id rule;
	uint64_t hash;
	char ns[MODEL_NS_LEN];
	char command[64];
	char shape[MODEL_SHAPE_LEN];
	char suggestion[1024];
	char detail[512];
	uint64_t count;
	char apps[MODEL_APPS_PER_FINDING][128];
	uint64_t app_counts[MODEL_APPS_PER_FINDING];
	size_t napps;
	size_t input; /* the input it was first seen in, into model.inputs */
	/* The ESR classification of the suggestion's key, from the request
	 * that first gave it (recommend.c): its first esr_neq fields are
	 * equality fields, the next esr_nsort sort fields; -1: not known (the
	 * key is then taken in its order, as written). */
	int esr_neq, esr_nsort;
	/* first given by a late verdict (the request not at hand): the
	 * classes come from its next on-time occurrence */
	bool esr_owed;
	/* Of a rule that grows arrays (rules.h, grows_arrays): the arrays its
	 * shape appends to; whether they were seen only small (arrays.c); and
	 * whether arr holds what replies showed. */
	char push_paths[4][128];
	size_t npush_paths;
	bool array_bounded;
	bool has_evidence;
	model_array_evidence arr;
} model_finding;

typedef struct model_field {
	char path[128];
	uint64_t count;
	int64_t max_len; /* arrays: longest seen in replies (-1: none seen) */
	/* arrays: each sampled reply's longest, with the reply's time (arrays.c;
	 * at most MODEL_ARRAY_SAMPLES, then only max_len follows) */
	int64_t *sample_t, *sample_len;
	size_t nsamples, capsamples;
} model_field;

typedef struct model_index {
	char name[128];
	char key[512]; /* the key pattern as JSON */
	char first[128];
	bool used;           /* some captured shape can use it (see aggregate.c) */
	bool constraint;     /* unique, partial, sparse, TTL or hidden: never redundant */
	char collation[256]; /* JSON, "" for the simple collation */
	int64_t ops;         /* $indexStats accesses.ops, -1 when unknown */
} model_index;

typedef struct model_ns {
	char ns[MODEL_NS_LEN];
	uint64_t ops, reads, lookups, pushes;
	uint64_t findings[RULE_COUNT]; /* of the rules with a profile row (rules.h) */
	char joined[8][MODEL_NS_LEN];
	size_t njoined;
	model_field *push; /* $push / $addToSet targets */
	size_t npush;
	model_field *arrays; /* array lengths seen in replies */
	size_t narrays;
	model_field *used; /* fields filters and sorts use (for index use) */
	size_t nused;
	uint64_t docs, doc_bytes;
	int64_t doc_max;
	uint64_t bloat[MODEL_BLOAT_BUCKETS];
	model_index *indexes;
	size_t nindexes;
	bool have_indexes;
	int64_t doc_count; /* estimated, with the last index list; -1 unknown */
	/* The workload (workload.c): writes (the command table's write kind,
	 * one per request); $addToSet targets alone (push holds both). */
	uint64_t writes;
	model_field *add_to_set;
	size_t nadd_to_set;
} model_ns;

/* A capture instance's time range (one mongoguard process): the rates of
 * a merged fleet are over the union of these (workload.c). */
typedef struct model_span {
	uint64_t instance;
	int64_t first, last; /* µs */
} model_span;

/* How two collections are read together (relationships.c): by a $lookup
 * in one aggregate, or on the client (a read of the parent, then reads of
 * the child by one key, one per parent document or in $in batches). */
typedef enum {
	MODEL_REL_LOOKUP,
	MODEL_REL_CLIENT_EACH, /* N+1: one read per parent document */
	MODEL_REL_CLIENT_IN,   /* a few $in batches (an ODM's populate) */
} model_rel_via;

typedef enum {
	MODEL_ADVICE_EMBED,
	MODEL_ADVICE_EXTENDED_REFERENCE,
	MODEL_ADVICE_REFERENCE,
} model_advice;

typedef struct model_rel {
	char parent[MODEL_NS_LEN], child[MODEL_NS_LEN];
	model_rel_via via;
	char key[128];        /* the child's field read by (foreignField, _id, ...) */
	char as[128];         /* a $lookup's output array (its length is the fan-out) */
	uint64_t occurrences; /* parent reads followed by the child's */
	uint64_t parent_shapes[8];
	size_t nparent_shapes;
	uint64_t parent_reads; /* of those parent shapes, after finish */
	uint64_t fanout_total; /* child documents asked for, over the occurrences */
	int64_t fanout_max;    /* -1: not known (a $lookup no sampled reply showed) */
	uint64_t fanout_samples;
	uint64_t child_reads;  /* the child's reads these occurrences made */
	int child_proj_fields; /* the widest child projection seen; -1: whole documents */
	/* after finish: per second over the covered time, and shares */
	double rate, share, fanout_avg, child_writes_s, child_solo_s;
	model_advice advice;
	char why[512]; /* the evidence that decided it, in words */
} model_rel;

/* One fix for a collection (recommend.c): an index that serves some
 * captured shapes (the merged ESR suggestions), or a design change named
 * by its pattern. Ranked: collections by the time their shapes spent,
 * then each collection's fixes by theirs. */
#define MODEL_REC_REDUNDANT 8
typedef struct model_rec {
	char ns[MODEL_NS_LEN];
	bool index;         /* an index to create; else a design change */
	rule_id rule;       /* the rule whose findings ask for it (the costliest shape's) */
	unsigned rules;     /* bit per rule whose findings ask for it */
	char key[512];      /* index: its key, as JSON */
	char command[1200]; /* index: the runnable createIndex */
	char pattern[48];   /* design: the pattern to apply */
	char change[1024];  /* design: the change in words; index: what else to do, or "" */
	uint64_t *shapes;   /* shape hashes served (index) or asking (design) */
	size_t nshapes;
	char redundant[MODEL_REC_REDUNDANT][128]; /* existing indexes it makes redundant */
	char redundant_key[MODEL_REC_REDUNDANT][512];
	size_t nredundant;
	bool exists;         /* the last index snapshot already holds it */
	int64_t total_us;    /* of the shapes it serves */
	int64_t ns_total_us; /* of every shape its collection's fixes name */
} model_rec;

typedef struct model_app {
	char app[128];
	uint64_t ops;
	int64_t total_us;
	uint64_t findings[RULE_COUNT];
	uint64_t shapes;
} model_app;

typedef struct model_db {
	char db[128];
	uint64_t collections;
} model_db;

/* --baseline: what changed from the baseline's model to this one. Indexes
 * into the models' arrays; before stays owned by report.c until the
 * writers are done. */
typedef struct model_regression {
	size_t shape;           /* in the new model */
	double before_p95, p95; /* ms */
} model_regression;

typedef struct model_diff {
	const struct model *before;
	size_t *new_shapes, nnew_shapes;       /* in the new model */
	size_t *gone_shapes, ngone_shapes;     /* in before */
	size_t *new_findings, nnew_findings;   /* in the new model */
	size_t *gone_findings, ngone_findings; /* in before */
	model_regression *regressions;
	size_t nregressions;
	/* per finding of the new model (nnow_findings of them): whether it is
	 * new, so a writer asks in constant time */
	bool *finding_new;
	size_t nnow_findings;
} model_diff;

/* Time charts (timeline.c): the capture's time range in
 * MODEL_TIME_BUCKETS intervals; findings per rule in each, and the p95
 * latency of the MODEL_TIME_SHAPES shapes with the most total time. */
#define MODEL_TIME_BUCKETS 30
#define MODEL_TIME_SHAPES  5

typedef struct model_tl_event { /* findings of one rule within one second */
	int64_t t_us;           /* the first one's */
	rule_id rule;
	uint64_t n;
} model_tl_event;

typedef struct model_timeline {
	int64_t start_us, width_us; /* bucket b covers start + b*width, one width long */
	size_t nb;                  /* 0: no requests */
	uint64_t rule[RULE_COUNT][MODEL_TIME_BUCKETS];
	size_t shape[MODEL_TIME_SHAPES]; /* into m->shapes */
	size_t nshapes;
	double p95[MODEL_TIME_SHAPES][MODEL_TIME_BUCKETS]; /* ms; -1: no reply then */
} model_timeline;

/* Driver and shell housekeeping (housekeeping.c): what it is and how
 * many requests, most first after aggregator_finish. */
#define MODEL_HOUSEKEEPING_KINDS 32
typedef struct model_housekeeping {
	char what[48]; /* the command's name, or the namespace mongosh reads */
	uint64_t count;
} model_housekeeping;

/* --rule RULE.PARAM=VALUE or RULE=ACTION (report.h): what the report
 * judged with instead of the capture's configuration. */
#define MODEL_OVERRIDES 16
typedef struct model_override {
	rule_id rule;
	int param;        /* into rule_table[rule]->params; -1: the action */
	uint32_t value;   /* the parameter's value, or a rule_action */
	uint32_t capture; /* what the capture's first header said (or the default) */
} model_override;

/* A shape listed under "scans below <parameter>": it returned at least
 * this many documents or bytes (either) over the capture. */
#define MODEL_QUIET_MIN_DOCS  1000
#define MODEL_QUIET_MIN_BYTES (1u << 20)

typedef struct model {
	model_input *inputs;
	size_t ninputs;
	int64_t t_min, t_max;
	uint64_t requests, replies, paired, blocked, gaps, dropped;
	uint64_t per_sec_base; /* t_min / 1e6 */
	uint64_t *per_sec;     /* operations in each second from t_min */
	size_t nsec;
	model_shape *shapes;
	size_t nshapes, capshapes;
	model_finding *findings;
	size_t nfindings, capfindings;
	uint64_t rule_totals[RULE_COUNT];
	model_ns *nss;
	size_t nnss, capnss;
	model_app *apps;
	size_t napps, capapps;
	model_db *dbs;
	size_t ndbs;
	bool indexes_live; /* --indexes-from */
	char indexes_from[512];
	model_tl_event *tl_ev; /* in record order, one per (second, rule) run */
	size_t ntl_ev, captl_ev;
	model_timeline tl;
	model_rec *recs; /* ranked (recommend.c) */
	size_t nrecs;
	bool redacted;          /* every input was redacted */
	bool no_value_hashes;   /* some input kept no value hashes (report.h) */
	const model_diff *diff; /* NULL without --baseline */
	model_housekeeping housekeeping[MODEL_HOUSEKEEPING_KINDS];
	size_t nhousekeeping;
	uint64_t housekeeping_requests;
	model_override overrides[MODEL_OVERRIDES];
	size_t noverrides;
	/* Each rule's quiet_below parameter as judged (rules.h); 0: none. */
	uint32_t quiet_below[RULE_COUNT];
	/* The workload (workload.c) and relationships (relationships.c). */
	model_span *spans;
	size_t nspans, capspans;
	double covered_s; /* the union of the spans, seconds: what rates are over */
	model_rel *rels;  /* by occurrences, most first, after finish */
	size_t nrels, caprels;
} model;

/* Whether shape s is one to list under "scans below <parameter>" for rule
 * r: no finding of r, one with the parameter at 0, and it returned a lot
 * (MODEL_QUIET_MIN_DOCS, MODEL_QUIET_MIN_BYTES). */
bool model_shape_quiet(const model_shape *s, rule_id r);

/* ---- the diff (diff.c) ---- */

/* A latency regression: p95 at least this much slower, by at least
 * MODEL_REGRESSION_MIN_MS, with MODEL_REGRESSION_MIN_REPLIES timed replies
 * on each side (fewer say nothing about a percentile). */
#define MODEL_REGRESSION_FACTOR      1.5
#define MODEL_REGRESSION_MIN_MS      1.0
#define MODEL_REGRESSION_MIN_REPLIES 5

void model_diff_build(const model *now, const model *before, model_diff *d);
void model_diff_free(model_diff *d);
/* Whether finding i of m is new (no baseline: every finding is). */
bool model_finding_is_new(const model *m, size_t i);

/* --fail-on new|any|RULE[,RULE] (gate.c). */
typedef struct report_gate {
	bool on;
	bool any, only_new;
	unsigned rules; /* bit per rule_id; 0 with any or only_new */
} report_gate;

/* False with err set when spec is not one of the forms. */
bool report_gate_parse(const char *spec, report_gate *g, char *err, size_t errlen)
    __attribute__((warn_unused_result));
/* Whether finding i of m matches: `any` every finding, `new` those not in
 * the baseline, RULE,... those of the rules (new ones only when there is
 * a baseline). */
bool report_gate_matches(const report_gate *g, const model *m, size_t i);

/* Failed replies as a share of the shape's paired replies (0..1). */
double model_failed_share(const model_shape *s);

/* ---- the writers ---- */

bool report_write_html(const model *m, FILE *f) __attribute__((warn_unused_result));
bool report_write_json(const model *m, FILE *f) __attribute__((warn_unused_result));
bool report_write_md(const model *m, FILE *f) __attribute__((warn_unused_result));
/* CI formats (ci.c): SARIF 2.1.0, one result per finding; JUnit XML, one
 * testcase per shape, a failure per finding --fail-on matched. */
bool report_write_sarif(const model *m, FILE *f) __attribute__((warn_unused_result));
bool report_write_junit(const model *m, const report_gate *g, FILE *f)
    __attribute__((warn_unused_result));

/* Frees what the aggregator and the report's passes allocated in m
 * (model.c), and zeroes it. */
void model_free(model *m);

#endif
