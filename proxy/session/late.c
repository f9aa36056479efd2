/* Late verdicts (see late.h). */
#include "proxy/session/late.h"

#include <stdlib.h>
#include <string.h>

#include "protocol/request.h"

/* One owed request: its bytes, then the app and client names, in one
 * allocation. */
typedef struct late_req {
	uint8_t *buf;
	size_t len;
	const char *app, *client; /* into buf, after the request */
	uint64_t conn;
	engine_late owed;
	int64_t due_ms; /* monotonic */
} late_req;

struct late_queue {
	metrics_shard *mx;
	late_req req[LATE_QUEUE_MAX];
	unsigned n;
};

void late_count_skipped(metrics_shard *mx, uint32_t rules, mx_skip_reason why)
{
	for (int r = 0; r < RULE_COUNT; r++)
		if (rules >> r & 1)
			mx_add(&mx->skipped[r][why], 1);
}

static uint32_t owed_rules(const engine_late *l)
{
	uint32_t rules = 0;
	for (unsigned i = 0; i < l->n; i++)
		rules |= l->at[i].rules;
	return rules;
}

late_queue *late_queue_new(metrics_shard *mx)
{
	late_queue *q = calloc(1, sizeof(*q));
	if (q)
		q->mx = mx;
	return q;
}

void late_queue_free(late_queue *q)
{
	if (!q)
		return;
	for (unsigned i = 0; i < q->n; i++) {
		late_count_skipped(q->mx, owed_rules(&q->req[i].owed), MX_SKIP_NEVER_CAME);
		free(q->req[i].buf);
	}
	free(q);
}

unsigned late_queue_size(const late_queue *q)
{
	return q->n;
}

void late_queue_owe(late_queue *q, const uint8_t *msg, size_t len, const engine_late *owed,
                    const char *app, const char *client, uint64_t conn, int64_t now_ms)
{
	if (owed->lost)
		late_count_skipped(q->mx, owed->lost, MX_SKIP_NO_ROOM);
	if (!owed->n)
		return;
	size_t alen = strlen(app) + 1, clen = strlen(client) + 1;
	late_req *l = q->n < LATE_QUEUE_MAX && len <= LATE_COPY_MAX ? &q->req[q->n] : NULL;
	if (!l || !(l->buf = malloc(len + alen + clen))) {
		late_count_skipped(q->mx, owed_rules(owed), MX_SKIP_NO_ROOM);
		return;
	}
	memcpy(l->buf, msg, len);
	memcpy(l->buf + len, app, alen);
	memcpy(l->buf + len + alen, client, clen);
	l->len = len;
	l->app = (const char *)l->buf + len;
	l->client = l->app + alen;
	l->conn = conn;
	l->owed = *owed;
	l->due_ms = now_ms + LATE_WAIT_MS;
	q->n++;
}

/* One owed request judged again by the rules it owes, now that the index
 * cache changed. True when nothing is owed any more, judged or expired. */
static bool rejudge_owed(late_queue *q, engine *e, late_req *l, int64_t now_ms)
{
	request r;
	wire_error err = {0};
	bool done = true;
	if (request_decode(&r, l->buf, l->len, &err) == REQUEST_COMMAND) {
		engine_late owed = l->owed;
		request_ctx rc = {.app_name = l->app,
		                  .client = l->client,
		                  .conn = l->conn,
		                  .now_ms = now_ms,
		                  .late = &owed};
		block_info b;
		engine_analyze(e, &r.view, &rc, &b);
		if (b.late.lost)
			late_count_skipped(q->mx, b.late.lost, MX_SKIP_NO_ROOM);
		l->owed = b.late;
		done = b.late.n == 0;
	}
	request_release(&r);
	if (!done && now_ms >= l->due_ms) {
		late_count_skipped(q->mx, owed_rules(&l->owed), MX_SKIP_NEVER_CAME);
		done = true;
	}
	return done;
}

void late_queue_judge(late_queue *q, engine *e, int64_t now_ms)
{
	unsigned keep = 0;
	for (unsigned i = 0; i < q->n; i++) {
		late_req *l = &q->req[i];
		if (!e || rejudge_owed(q, e, l, now_ms))
			free(l->buf);
		else
			q->req[keep++] = *l;
	}
	q->n = keep;
}

void late_queue_expire(late_queue *q, int64_t now_ms)
{
	unsigned keep = 0;
	for (unsigned i = 0; i < q->n; i++) {
		late_req *l = &q->req[i];
		if (now_ms >= l->due_ms) {
			late_count_skipped(q->mx, owed_rules(&l->owed), MX_SKIP_NEVER_CAME);
			free(l->buf);
		} else {
			q->req[keep++] = *l;
		}
	}
	q->n = keep;
}
