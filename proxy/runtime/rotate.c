/* SIGUSR1 (see rotate.h). */
#include "proxy/runtime/rotate.h"

void rotate_logs(log_rotate how, capture_sink *capture)
{
	char renamed[1200], err[1400];
	log_line *l =
	    log_begin(LOG_INFO, "CONTROL", LOGID_LOG_ROTATED, NULL, "Log rotation initiated");
	log_attr_str(l, "rotate", log_rotate_name(how));
	log_end(l);
	if (log_reopen(how, renamed, sizeof(renamed), err, sizeof(err))) {
		l = log_begin(LOG_INFO, "CONTROL", LOGID_LOG_ROTATED, NULL, "Log rotated");
		log_attr_str(l, "rotate", log_rotate_name(how));
		if (renamed[0])
			log_attr_str(l, "previous", renamed);
		log_end(l);
	} else {
		log_reason(LOG_WARNING, "CONTROL", LOGID_LOG_ROTATED, NULL,
		           "Log not rotated; it stays where it was: %s", err);
	}
	if (capture) {
		capture_sink_rotate(capture);
		log_reason(LOG_INFO, "CONTROL", LOGID_LOG_ROTATED, NULL,
		           "Capture: a new file starts now");
	}
}
