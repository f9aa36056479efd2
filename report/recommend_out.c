/* The recommendations as each writer shows them (sections.h): one
 * block per collection in rank order, each fix either a runnable command
 * (in a code block) or a design change named by its pattern (in words,
 * never in a code block). */
#include <inttypes.h>
#include <string.h>

#include "report/recommend.h"
#include "report/sections.h"

static const char MERGE_RULE[] =
    "Index suggestions (ESR: equality, sort, range) of different query shapes are merged "
    "when one index serves them all: an index serves a shape when the shape's suggested "
    "key is a prefix of it, or equal to one once its equality fields are reordered "
    "(equality fields in any order, then the sort fields in order, then the range fields). "
    "An existing index whose key is a prefix of a recommended one, with the same collation "
    "and no unique, partial, sparse or TTL option, is redundant once it is built.";

size_t model_fix_command_len(const char *fix)
{
	rec_command c;
	return rec_parse_command(fix, &c) ? c.len : 0;
}

const model_shape *model_shape_by_hash(const model *m, uint64_t hash)
{
	for (size_t i = 0; i < m->nshapes; i++)
		if (m->shapes[i].hash == hash)
			return &m->shapes[i];
	return NULL;
}

/* db.getSiblingDB("d").getCollection("c").dropIndex("name") */
static void drop_command(text_buf *t, const char *ns, const char *name)
{
	const char *dot = strchr(ns, '.');
	size_t dl = dot ? (size_t)(dot - ns) : strlen(ns);
	text_str(t, "db.getSiblingDB(");
	text_json_str(t, ns, dl, TEXT_JSON_QUOTED | TEXT_JSON_UTF8);
	text_str(t, ").getCollection(");
	out_json_str(t, dot ? dot + 1 : "");
	text_str(t, ").dropIndex(");
	out_json_str(t, name);
	text_char(t, ')');
}

/* ---- HTML ---- */

static void html_shapes(out_t *o, const model *m, const model_rec *r)
{
	text_str(&o->t, "<ul class=\"served\">");
	for (size_t s = 0; s < r->nshapes; s++) {
		const model_shape *sh = model_shape_by_hash(m, r->shapes[s]);
		text_printf(&o->t, "<li><span class=\"muted\">%016" PRIx64 "</span> ",
		            r->shapes[s]);
		if (sh) {
			text_html(&o->t, sh->command);
			text_printf(&o->t, " ×%" PRIu64 ", %.1f ms: <code>", sh->count,
			            (double)sh->total_us / 1000.0);
			text_html(&o->t, sh->shape);
			text_str(&o->t, "</code>");
		}
		text_str(&o->t, "</li>");
		out_flush(o);
	}
	text_str(&o->t, "</ul>");
}

static void html_rec(out_t *o, const model *m, const model_rec *r)
{
	text_printf(&o->t, "<li class=\"rec\" data-ns=\"");
	text_html(&o->t, r->ns);
	text_str(&o->t, "\" data-rules=\" ");
	for (int k = 0; k < RULE_COUNT; k++)
		if (r->rules & (1u << k))
			text_printf(&o->t, "%s ", rule_name((rule_id)k));
	text_str(&o->t, "\">");
	if (r->index) {
		text_printf(&o->t,
		            "<b>Create an index</b> serving %zu shape%s (%.1f ms)%s:"
		            "<pre class=\"fix\">",
		            r->nshapes, r->nshapes == 1 ? "" : "s", (double)r->total_us / 1000.0,
		            r->exists ? " <span class=\"ok\">(the last index snapshot already "
		                        "holds an index that serves them)</span>"
		                      : "");
		text_html(&o->t, r->command);
		text_str(&o->t, "</pre>");
		if (r->change[0]) {
			text_str(&o->t, "<p>Then: ");
			text_html(&o->t, r->change);
			text_str(&o->t, "</p>");
		}
	} else {
		text_printf(&o->t, "<b>Design change: ");
		text_html(&o->t, r->pattern);
		text_printf(&o->t,
		            "</b> <a class=\"tag\" href=\"#rule-%s\">%s</a> for %zu shape%s "
		            "(%.1f ms)<p class=\"change\">",
		            rule_name(r->rule), rule_name(r->rule), r->nshapes,
		            r->nshapes == 1 ? "" : "s", (double)r->total_us / 1000.0);
		text_html(&o->t, r->change);
		text_str(&o->t, "</p>");
	}
	out_flush(o);
	text_str(&o->t, r->index ? "<p>Serves:</p>" : "<p>Asked by:</p>");
	html_shapes(o, m, r);
	for (size_t k = 0; k < r->nredundant; k++) {
		text_str(&o->t,
		         k ? "" : "<p>Makes redundant (drop once the new index is built):</p>");
		text_str(&o->t, "<pre class=\"fix redundant\">");
		char cmd[512];
		text_buf c;
		text_init(&c, cmd, sizeof cmd);
		drop_command(&c, r->ns, r->redundant[k]);
		text_html(&o->t, text_finish(&c));
		text_str(&o->t, " // ");
		text_html(&o->t, r->redundant_key[k]);
		text_str(&o->t, "</pre>");
	}
	text_str(&o->t, "</li>");
	out_flush(o);
}

void report_recs_html(out_t *o, const model *m)
{
	text_str(&o->t,
	         "<section id=\"recommendations\"><h2>Recommendations</h2><p class=\"muted\">"
	         "One recommendation per collection, ranked by the time its shapes spent "
	         "(total latency). ");
	text_str(&o->t, MERGE_RULE);
	text_str(&o->t, "</p>");
	if (!m->nrecs)
		text_str(&o->t, "<p>No finding asks for a change.</p>");
	else
		report_legend_html(&o->t);
	size_t rank = 0;
	for (size_t i = 0; i < m->nrecs; i++) {
		const model_rec *r = &m->recs[i];
		if (!i || strcmp(r->ns, m->recs[i - 1].ns)) {
			text_str(&o->t, i ? "</ol></div>" : "");
			text_str(&o->t, "<div class=\"rec-ns\" data-ns=\"");
			text_html(&o->t, r->ns);
			text_printf(&o->t, "\"><h3>%zu. ", ++rank);
			text_html(&o->t, r->ns);
			text_printf(&o->t,
			            " <span class=\"muted\">%.1f ms in its shapes</span></h3><ol>",
			            (double)r->ns_total_us / 1000.0);
		}
		html_rec(o, m, r);
	}
	text_str(&o->t, m->nrecs ? "</ol></div></section>" : "</section>");
	out_flush(o);
}

/* ---- JSON ---- */

void report_recs_json(out_t *o, const model *m)
{
	size_t rank = 0;
	text_str(&o->t, "\"recommendations\":[");
	for (size_t i = 0; i < m->nrecs; i++) {
		const model_rec *r = &m->recs[i];
		if (!i || strcmp(r->ns, m->recs[i - 1].ns))
			rank++;
		text_printf(&o->t, "%s{\"rank\":%zu,\"collectionRank\":%zu,\"ns\":", i ? "," : "",
		            i + 1, rank);
		out_json_str(&o->t, r->ns);
		text_printf(&o->t, ",\"kind\":\"%s\",\"rule\":\"%s\",\"rules\":[",
		            r->index ? "index" : "design", rule_name(r->rule));
		for (int k = 0, n = 0; k < RULE_COUNT; k++)
			if (r->rules & (1u << k))
				text_printf(&o->t, "%s\"%s\"", n++ ? "," : "",
				            rule_name((rule_id)k));
		text_str(&o->t, "],\"key\":");
		if (r->index) {
			out_json_str(&o->t, r->key);
			text_str(&o->t, ",\"command\":");
			out_json_str(&o->t, r->command);
			text_str(&o->t, ",\"pattern\":null");
		} else {
			text_str(&o->t, "null,\"command\":null,\"pattern\":");
			out_json_str(&o->t, r->pattern);
		}
		text_str(&o->t, ",\"change\":");
		out_json_str(&o->t, r->change);
		text_str(&o->t, ",\"shapes\":[");
		for (size_t s = 0; s < r->nshapes; s++)
			text_printf(&o->t, "%s\"%016" PRIx64 "\"", s ? "," : "", r->shapes[s]);
		text_str(&o->t, "],\"redundantIndexes\":[");
		for (size_t k = 0; k < r->nredundant; k++) {
			text_str(&o->t, k ? ",{\"name\":" : "{\"name\":");
			out_json_str(&o->t, r->redundant[k]);
			text_str(&o->t, ",\"key\":");
			out_json_str(&o->t, r->redundant_key[k]);
			char cmd[512];
			text_buf c;
			text_init(&c, cmd, sizeof cmd);
			drop_command(&c, r->ns, r->redundant[k]);
			text_str(&o->t, ",\"dropCommand\":");
			out_json_str(&o->t, text_finish(&c));
			text_char(&o->t, '}');
		}
		text_printf(&o->t,
		            "],\"alreadyExists\":%s,\"totalMs\":%.3f,\"collectionTotalMs\":%.3f}",
		            r->exists ? "true" : "false", (double)r->total_us / 1000.0,
		            (double)r->ns_total_us / 1000.0);
		out_flush(o);
	}
	text_str(&o->t, "],");
}

/* ---- Markdown ---- */

/* The index's createIndex and the drops it makes possible, in one fenced
 * block inside the list item: the fence outgrows any backtick run in them
 * (a field or a collection may hold one), each command one line. */
static void md_index_block(out_t *o, const model_rec *r)
{
	char cmds[MODEL_REC_REDUNDANT][512];
	size_t fence = out_md_fence_need(3, r->command, sizeof r->command);
	for (size_t k = 0; k < r->nredundant; k++) {
		text_buf c;
		text_init(&c, cmds[k], sizeof cmds[k]);
		drop_command(&c, r->ns, r->redundant[k]);
		text_finish(&c);
		fence = out_md_fence_need(fence, cmds[k], sizeof cmds[k]);
		fence = out_md_fence_need(fence, r->redundant_key[k], sizeof r->redundant_key[k]);
	}
	text_str(&o->t, "  ");
	out_md_fence(&o->t, fence);
	text_str(&o->t, "js\n  ");
	out_md_code_line(&o->t, r->command, sizeof r->command);
	text_char(&o->t, '\n');
	for (size_t k = 0; k < r->nredundant; k++) {
		text_str(&o->t, "  ");
		out_md_code_line(&o->t, cmds[k], sizeof cmds[k]);
		text_str(&o->t, " // redundant: ");
		out_md_code_line(&o->t, r->redundant_key[k], sizeof r->redundant_key[k]);
		text_char(&o->t, '\n');
	}
	text_str(&o->t, "  ");
	out_md_fence(&o->t, fence);
	text_char(&o->t, '\n');
}

void report_recs_md(out_t *o, const model *m)
{
	size_t rank = 0;
	text_str(&o->t, "\n## Recommendations\n\nOne per collection, ranked by the time its "
	                "shapes spent. ");
	text_str(&o->t, MERGE_RULE);
	text_str(&o->t, "\n");
	for (size_t i = 0; i < m->nrecs; i++) {
		const model_rec *r = &m->recs[i];
		if (!i || strcmp(r->ns, m->recs[i - 1].ns)) {
			text_printf(&o->t, "\n### %zu. ", ++rank);
			out_md_code(&o->t, r->ns, sizeof r->ns, false);
			text_printf(&o->t, " (%.1f ms)\n\n", (double)r->ns_total_us / 1000.0);
		}
		if (r->index) {
			text_printf(&o->t, "- Create an index serving %zu shape%s (%.1f ms)%s:\n\n",
			            r->nshapes, r->nshapes == 1 ? "" : "s",
			            (double)r->total_us / 1000.0,
			            r->exists ? " (already in the last index snapshot)" : "");
			md_index_block(o, r);
			if (r->change[0]) {
				text_str(&o->t, "\n  Then: ");
				out_md_text(&o->t, r->change);
				text_char(&o->t, '\n');
			}
		} else {
			text_str(&o->t, "- Design change, **");
			out_md_text(&o->t, r->pattern);
			text_printf(&o->t, "** (`%s`, %zu shape%s, %.1f ms): ", rule_name(r->rule),
			            r->nshapes, r->nshapes == 1 ? "" : "s",
			            (double)r->total_us / 1000.0);
			out_md_text(&o->t, r->change);
			text_char(&o->t, '\n');
		}
		text_str(&o->t, "  Shapes:");
		for (size_t s = 0; s < r->nshapes; s++)
			text_printf(&o->t, " `%016" PRIx64 "`", r->shapes[s]);
		text_str(&o->t, "\n");
		out_flush(o);
	}
}
