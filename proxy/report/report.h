/* `mongoguard report CAPTURE... [--indexes-from URI] [-o report.html]
 * [--json FILE] [--md FILE]`: the offline design review.
 *
 * The report reads capture files (protocol/capture.h), decodes every
 * captured request with the live path's request_decode, and runs it
 * through the live path's engine_analyze, with an index cache filled from
 * the capture's index snapshots (or, with --indexes-from, from a live
 * server). It aggregates what it reads into a model (model.h) that three
 * writers render: html.c (a self-contained page), json.c (documented in
 * README.md) and md.c (a Markdown summary). */
#ifndef MG_PROXY_REPORT_REPORT_H
#define MG_PROXY_REPORT_REPORT_H

#include <stdbool.h>
#include <stddef.h>

typedef struct report_options {
	const char *const *inputs; /* capture files */
	size_t ninputs;
	const char *indexes_from; /* NULL: the capture's snapshots */
	const char *html;         /* NULL: none */
	const char *json;
	const char *md;
	bool progress; /* a progress bar on stderr */
	bool quiet;    /* no summary line on stderr (the benchmark) */
} report_options;

/* The subcommand: argv[0] is "report". Returns the exit status: 0, 1 when
 * an input could not be read (or was refused), 2 for a bad command line. */
int report_main(int argc, char **argv);

/* Reads, analyses, writes. False with err set when nothing could be
 * written; inputs refused or cut short are said in the report and err. */
bool report_run(const report_options *o, unsigned long long *records, char *err, size_t errlen)
    __attribute__((warn_unused_result));

#endif
