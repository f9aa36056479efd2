/* `mongoguard report CAPTURE... [--baseline CAPTURE]... [--fail-on
 * new|any|RULE[,RULE]] [--indexes-from URI] [-o report.html] [--json FILE]
 * [--md FILE] [--sarif FILE] [--junit FILE]`: the offline design review.
 * A CAPTURE is a capture file or a capture directory.
 *
 * The report reads capture files (protocol/capture.h), decodes every
 * captured request with the live path's request_decode, and runs it
 * through the live path's engine_analyze, with an index cache filled from
 * the capture's index snapshots (or, with --indexes-from, from a live
 * server). It aggregates what it reads into a model (model.h) that three
 * writers render: html.c (a self-contained page), json.c (documented in
 * README.md) and md.c (a Markdown summary). */
#ifndef MG_REPORT_REPORT_H
#define MG_REPORT_REPORT_H

#include <stdbool.h>
#include <stddef.h>

#include "protocol/text.h"
#include "report/model.h"

typedef struct report_options {
	const char *const *inputs; /* capture files (report_inputs_expand) */
	size_t ninputs;
	const char *const *baseline; /* --baseline: capture files, or none */
	size_t nbaseline;
	const char *fail_on; /* --fail-on, or NULL */
	const char *sarif;   /* NULL: none */
	const char *junit;
	const char *indexes_from; /* NULL: the capture's snapshots */
	const char *html;         /* NULL: none */
	const char *json;
	const char *md;
	/* --rule: judged with these instead of the capture's (both sides of a
	 * --baseline diff) */
	const model_override *overrides;
	size_t noverrides;
	bool progress; /* a progress bar on stderr */
	bool quiet;    /* no summary line on stderr (the benchmark) */
} report_options;

/* The subcommand: argv[0] is "report". Returns the exit status: 0; 1 when
 * an input could not be read (missing, unreadable, a format version it does
 * not know), or --fail-on matched a finding; 2 for a bad command line: an
 * unknown flag, a bad --fail-on or --rule, a name that is no capture. */
int report_main(int argc, char **argv);

/* Capture files and directories (a directory: its *.bson files in name
 * order) into a list of files, each of which starts with a capture
 * header. False with err naming the first that is no capture or cannot be
 * read, and *unreadable set when it could not be read at all (missing, no
 * permission). Free the list with report_inputs_free. */
bool report_inputs_expand(const char *const *args, size_t n, char ***out, size_t *nout,
                          bool *unreadable, char *err, size_t errlen)
    __attribute__((warn_unused_result));
void report_inputs_free(char **v, size_t n);

/* Reads, analyses, writes. False with err set when nothing could be
 * written; inputs refused or cut short are said in the report and err. */
bool report_run(const report_options *o, unsigned long long *records, char *err, size_t errlen)
    __attribute__((warn_unused_result));
/* The same; *matched: how many findings --fail-on matched. */
bool report_run_gated(const report_options *o, unsigned long long *records, size_t *matched,
                      char *err, size_t errlen) __attribute__((warn_unused_result));

/* What the report says (HTML and Markdown overview, stderr) when an input
 * was captured with capture.valueHashes: false: its records hold no vh or
 * vals, so the replay judged client-side-join chains by their counts
 * alone, as over a version 4 capture, while the live proxy judged them
 * with the values. Plain text: no HTML or Markdown markup; no rule id
 * (scripts/check_rule_ids.py). */
#define REPORT_NO_VALUE_HASHES                                                                     \
	"client-side joins were judged without the values (the capture was taken with "            \
	"capture.valueHashes: false, so each chain by its count alone): their findings "           \
	"may differ from the live log"

/* --rule RULE.PARAMETER=VALUE or RULE=off|log (rule_arg.c): false with
 * err naming what is allowed (the rules, the rule's parameters, the
 * parameter's bounds). */
bool report_rule_parse(const char *spec, model_override *o, char *err, size_t errlen)
    __attribute__((warn_unused_result));
/* The overrides that differ from the capture's, as words ("rule.param=100
 * (the capture's: 10000)"); how many. */
size_t report_overrides_words(text_buf *t, const model *m);
/* "judgedWith":[{rule, parameter (null: the action), value, capture}] */
void report_overrides_json(text_buf *t, const model *m);

#endif
