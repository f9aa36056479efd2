/* --json: the model as one JSON document (schema in README.md, "Capture
 * and design review"). Keys are camelCase; times are microseconds since
 * the epoch, latencies milliseconds. */
#include <inttypes.h>
#include <stdlib.h>

#include "report/model.h"
#include "report/diff_out.h"
#include "report/out.h"
#include "report/report.h"
#include "report/sections.h"
#include "report/sort.h"

static void inputs(out_t *o, const model *m)
{
	text_str(&o->t, "\"inputs\":[");
	for (size_t i = 0; i < m->ninputs; i++) {
		const model_input *in = &m->inputs[i];
		text_str(&o->t, i ? ",{\"path\":" : "{\"path\":");
		out_json_str(&o->t, in->path);
		text_str(&o->t, ",\"mongoguard\":");
		out_json_str(&o->t, in->mongoguard);
		text_str(&o->t, ",\"redaction\":");
		out_json_str(&o->t, in->redaction);
		text_printf(&o->t, ",\"valueHashes\":%s", in->no_value_hashes ? "false" : "true");
		text_printf(&o->t, ",\"records\":%" PRIu64 ",\"refused\":%s,\"truncated\":%s",
		            in->records, in->refused ? "true" : "false",
		            in->truncated ? "true" : "false");
		if (in->truncated)
			text_printf(&o->t, ",\"stoppedAt\":%" PRIu64, in->stopped_at);
		text_str(&o->t, ",\"problem\":");
		out_json_str(&o->t, in->problem);
		text_char(&o->t, '}');
		out_flush(o);
	}
	text_str(&o->t, "],");
}

static void overview(out_t *o, const model *m)
{
	text_printf(&o->t,
	            "\"overview\":{\"start\":%" PRId64 ",\"end\":%" PRId64 ",\"requests\":%" PRIu64
	            ",\"replies\":%" PRIu64 ",\"paired\":%" PRIu64 ",\"blocked\":%" PRIu64
	            ",\"gaps\":%" PRIu64 ",\"dropped\":%" PRIu64
	            ",\"redacted\":%s,\"valueHashes\":%s,\"indexesFrom\":",
	            m->t_min, m->t_max, m->requests, m->replies, m->paired, m->blocked, m->gaps,
	            m->dropped, m->redacted ? "true" : "false",
	            m->no_value_hashes ? "false" : "true");
	if (m->indexes_live)
		out_json_str(&o->t, m->indexes_from);
	else
		text_str(&o->t, "\"capture\"");
	text_str(&o->t, ",\"findingsPerRule\":{");
	for (int r = 0; r < RULE_COUNT; r++)
		text_printf(&o->t, "%s\"%s\":%" PRIu64, r ? "," : "", rule_name((rule_id)r),
		            m->rule_totals[r]);
	uint64_t occurrences = 0;
	for (int r = 0; r < RULE_COUNT; r++)
		occurrences += m->rule_totals[r];
	text_printf(&o->t,
	            "},\"findings\":%zu,\"occurrences\":%" PRIu64
	            ",\"housekeeping\":{\"requests\":%" PRIu64 ",\"commands\":{",
	            m->nfindings, occurrences, m->housekeeping_requests);
	for (size_t i = 0; i < m->nhousekeeping; i++) {
		text_str(&o->t, i ? "," : "");
		out_json_str(&o->t, m->housekeeping[i].what);
		text_printf(&o->t, ":%" PRIu64, m->housekeeping[i].count);
	}
	text_str(&o->t, "}},");
	report_overrides_json(&o->t, m);
	text_printf(&o->t, ",\"opsPerSecond\":{\"start\":%" PRIu64 ",\"counts\":[",
	            m->per_sec_base);
	out_flush(o);
	for (size_t i = 0; i < m->nsec; i++) {
		text_printf(&o->t, "%s%" PRIu64, i ? "," : "", m->per_sec[i]);
		if ((i & 1023) == 1023)
			out_flush(o);
	}
	text_str(&o->t, "]}},");
	out_flush(o);
}

static void rules_list(text_buf *t, unsigned rules)
{
	text_char(t, '[');
	bool first = true;
	for (int r = 0; r < RULE_COUNT; r++)
		if (rules & (1u << r)) {
			text_str(t, first ? "\"" : ",\"");
			text_str(t, rule_name((rule_id)r));
			text_char(t, '"');
			first = false;
		}
	text_char(t, ']');
}

static void shapes(out_t *o, const model *m)
{
	size_t *order = model_shapes_by_time(m);
	double secs = m->covered_s; /* the instances' time ranges (workload.c) */
	text_str(&o->t, "\"shapes\":[");
	for (size_t k = 0; order && k < m->nshapes; k++) {
		const model_shape *s = &m->shapes[order[k]];
		char hex[17];
		snprintf(hex, sizeof hex, "%016" PRIx64, s->hash);
		text_printf(&o->t, "%s{\"shapeHash\":\"%s\",\"ns\":", k ? "," : "", hex);
		out_json_str(&o->t, s->ns);
		text_str(&o->t, ",\"command\":");
		out_json_str(&o->t, s->command);
		text_str(&o->t, ",\"shape\":");
		out_json_str(&o->t, s->shape);
		text_str(&o->t, ",\"app\":");
		out_json_str(&o->t, s->app);
		text_printf(
		    &o->t,
		    ",\"count\":%" PRIu64 ",\"ratePerSec\":%.3f,\"replies\":%zu,\"p50Ms\":%.3f,"
		    "\"p95Ms\":%.3f,\"p99Ms\":%.3f,\"totalMs\":%.3f,\"docsReturned\":%" PRIu64
		    ",\"bytesReturned\":%" PRIu64 ",\"errors\":%" PRIu64 ",\"rules\":",
		    s->count, secs > 0 ? (double)s->count / secs : 0.0, s->nlat, s->p50, s->p95,
		    s->p99, (double)s->total_us / 1000.0, s->docs, s->bytes, s->errors);
		rules_list(&o->t, s->rules);
		text_printf(&o->t, ",\"failedShare\":%.3f,\"mostlyFails\":%s,\"errorCodes\":[",
		            model_failed_share(s), s->mostly_fails ? "true" : "false");
		for (size_t c = 0; c < s->ncodes; c++)
			text_printf(&o->t, "%s{\"code\":%" PRId32 ",\"count\":%" PRIu64 "}",
			            c ? "," : "", s->codes[c], s->code_counts[c]);
		text_printf(&o->t, "],\"otherErrorCodes\":%" PRIu64 "}", s->other_codes);
		out_flush(o);
	}
	free(order);
	text_str(&o->t, "],");
}

static void findings(out_t *o, const model *m)
{
	size_t npush = 0, *pushes = model_array_findings_by_growth(m, &npush);
	size_t *rank = calloc(m->nfindings ? m->nfindings : 1, sizeof *rank);
	for (size_t k = 0; pushes && rank && k < npush; k++)
		rank[pushes[k]] = k + 1;
	free(pushes);
	text_str(&o->t, "\"findings\":[");
	for (size_t i = 0; i < m->nfindings; i++) {
		const model_finding *f = &m->findings[i];
		char hex[17];
		snprintf(hex, sizeof hex, "%016" PRIx64, f->hash);
		text_printf(&o->t, "%s{\"rule\":\"%s\",\"fix\":", i ? "," : "", rule_name(f->rule));
		out_json_str(&o->t, rule_table[f->rule]->fix_kind);
		text_printf(&o->t, ",\"shapeHash\":\"%s\",\"ns\":", hex);
		out_json_str(&o->t, f->ns);
		text_str(&o->t, ",\"command\":");
		out_json_str(&o->t, f->command);
		text_printf(&o->t, ",\"count\":%" PRIu64 ",\"example\":", f->count);
		out_json_str(&o->t, f->shape);
		/* the detail is one occurrence's (the first): said, so its figures
		 * are not read as every occurrence's */
		text_str(&o->t, ",\"detail\":");
		out_json_str(&o->t, f->detail);
		text_printf(&o->t, ",\"detailOf\":\"%s\",\"new\":%s",
		            f->count > 1 ? "first occurrence" : "the occurrence",
		            model_finding_is_new(m, i) ? "true" : "false");
		text_str(&o->t, ",\"suggestion\":");
		out_json_str(&o->t, f->suggestion);
		text_str(&o->t, ",\"apps\":{");
		for (size_t a = 0; a < f->napps; a++) {
			if (a)
				text_char(&o->t, ',');
			out_json_str(&o->t, f->apps[a]);
			text_printf(&o->t, ":%" PRIu64, f->app_counts[a]);
		}
		text_char(&o->t, '}');
		report_arrays_json(&o->t, f, rank ? rank[i] : 0);
		text_char(&o->t, '}');
		out_flush(o);
	}
	free(rank);
	text_str(&o->t, "],");
}

static void fields(text_buf *t, const char *key, const model_field *f, size_t n, bool lens)
{
	text_printf(t, ",\"%s\":[", key);
	for (size_t i = 0; i < n; i++) {
		text_str(t, i ? ",{\"path\":" : "{\"path\":");
		out_json_str(t, f[i].path);
		if (lens)
			text_printf(t, ",\"maxLength\":%" PRId64 "}", f[i].max_len);
		else
			text_printf(t, ",\"count\":%" PRIu64 "}", f[i].count);
	}
	text_char(t, ']');
}

static void schema(out_t *o, const model *m)
{
	text_str(&o->t, "\"collections\":[");
	for (size_t i = 0; i < m->nnss; i++) {
		const model_ns *n = &m->nss[i];
		text_str(&o->t, i ? ",{\"ns\":" : "{\"ns\":");
		out_json_str(&o->t, n->ns);
		text_printf(&o->t,
		            ",\"ops\":%" PRIu64 ",\"reads\":%" PRIu64
		            ",\"readsWithLookup\":%" PRIu64,
		            n->ops, n->reads, n->lookups);
		for (int r = 0; r < RULE_COUNT; r++)
			if (rule_table[r]->profile_key)
				text_printf(&o->t, ",\"%s\":%" PRIu64, rule_table[r]->profile_key,
				            n->findings[r]);
		text_printf(&o->t,
		            ",\"pushes\":%" PRIu64 ",\"documentsSampled\":%" PRIu64
		            ",\"documentBytes\":%" PRIu64 ",\"largestDocument\":%" PRId64
		            ",\"sizeBuckets\":[",
		            n->pushes, n->docs, n->doc_bytes, n->doc_max);
		for (int b = 0; b < MODEL_BLOAT_BUCKETS; b++)
			text_printf(&o->t, "%s%" PRIu64, b ? "," : "", n->bloat[b]);
		text_str(&o->t, "],\"joined\":[");
		for (size_t j = 0; j < n->njoined; j++) {
			if (j)
				text_char(&o->t, ',');
			out_json_str(&o->t, n->joined[j]);
		}
		text_char(&o->t, ']');
		fields(&o->t, "pushTargets", n->push, n->npush, false);
		fields(&o->t, "arrayLengths", n->arrays, n->narrays, true);
		text_printf(&o->t,
		            ",\"estimatedDocuments\":%" PRId64 ",\"indexesKnown\":%s,\"indexes\":[",
		            n->doc_count, n->have_indexes ? "true" : "false");
		for (size_t k = 0; k < n->nindexes; k++) {
			const model_index *x = &n->indexes[k];
			text_str(&o->t, k ? ",{\"name\":" : "{\"name\":");
			out_json_str(&o->t, x->name);
			text_str(&o->t, ",\"key\":");
			out_json_str(&o->t, x->key);
			text_printf(&o->t,
			            ",\"usedByCapturedShapes\":%s,\"indexStatsOps\":%" PRId64 "}",
			            x->used ? "true" : "false", x->ops);
		}
		text_str(&o->t, "]}");
		out_flush(o);
	}
	text_str(&o->t, "],\"databases\":[");
	for (size_t i = 0; i < m->ndbs; i++) {
		text_str(&o->t, i ? ",{\"db\":" : "{\"db\":");
		out_json_str(&o->t, m->dbs[i].db);
		text_printf(&o->t, ",\"collections\":%" PRIu64 "}", m->dbs[i].collections);
	}
	text_str(&o->t, "],");
	out_flush(o);
}

static void apps(out_t *o, const model *m)
{
	text_str(&o->t, "\"apps\":[");
	for (size_t i = 0; i < m->napps; i++) {
		const model_app *a = &m->apps[i];
		text_str(&o->t, i ? ",{\"app\":" : "{\"app\":");
		out_json_str(&o->t, a->app);
		text_printf(&o->t,
		            ",\"ops\":%" PRIu64 ",\"totalMs\":%.3f,\"shapes\":%" PRIu64
		            ",\"findings\":{",
		            a->ops, (double)a->total_us / 1000.0, a->shapes);
		for (int r = 0; r < RULE_COUNT; r++)
			text_printf(&o->t, "%s\"%s\":%" PRIu64, r ? "," : "", rule_name((rule_id)r),
			            a->findings[r]);
		text_str(&o->t, "}}");
		out_flush(o);
	}
	text_str(&o->t, "]");
}

bool report_write_json(const model *m, FILE *f)
{
	static out_t o; /* 64 KiB: off the stack */
	out_init(&o, f);
	text_str(&o.t, "{\"format\":\"mongoguard-report\",\"version\":1,");
	inputs(&o, m);
	overview(&o, m);
	report_timeline_json(&o, m);
	shapes(&o, m);
	report_quiet_json(&o, m);
	findings(&o, m);
	report_recs_json(&o, m);
	report_diff_json(&o, m);
	report_workload_json(&o, m);
	report_rels_json(&o, m);
	schema(&o, m);
	apps(&o, m);
	text_str(&o.t, "}\n");
	return out_done(&o);
}
