/* Late verdicts (see late_queue.h). */
#include "analyzers/engine/late_queue.h"

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
	late_lost_fn lost;
	void *lost_arg;
	late_req req[LATE_QUEUE_MAX];
	unsigned n;
};

static uint32_t owed_rules(const engine_late *l)
{
	uint32_t rules = 0;
	for (unsigned i = 0; i < l->n; i++)
		rules |= l->at[i].rules;
	return rules;
}

/* Tells q's owner that rules' verdicts are lost. */
static void lose(const late_queue *q, uint32_t rules, late_loss why)
{
	if (rules && q->lost)
		q->lost(q->lost_arg, rules, why);
}

late_queue *late_queue_new(late_lost_fn lost, void *arg)
{
	late_queue *q = calloc(1, sizeof(*q));
	if (q) {
		q->lost = lost;
		q->lost_arg = arg;
	}
	return q;
}

void late_queue_free(late_queue *q)
{
	if (!q)
		return;
	for (unsigned i = 0; i < q->n; i++) {
		lose(q, owed_rules(&q->req[i].owed), LATE_LOST_NEVER_CAME);
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
		lose(q, owed->lost, LATE_LOST_NO_ROOM);
	if (!owed->n)
		return;
	size_t alen = strlen(app) + 1, clen = strlen(client) + 1;
	late_req *l = q->n < LATE_QUEUE_MAX && len <= LATE_COPY_MAX ? &q->req[q->n] : NULL;
	if (!l || !(l->buf = malloc(len + alen + clen))) {
		lose(q, owed_rules(owed), LATE_LOST_NO_ROOM);
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
			lose(q, b.late.lost, LATE_LOST_NO_ROOM);
		if (b.late.changed)
			lose(q, b.late.changed, LATE_LOST_SCHEMA_CHANGED);
		l->owed = b.late;
		done = b.late.n == 0;
	}
	request_release(&r);
	if (!done && now_ms >= l->due_ms) {
		lose(q, owed_rules(&l->owed), LATE_LOST_NEVER_CAME);
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
			lose(q, owed_rules(&l->owed), LATE_LOST_NEVER_CAME);
			free(l->buf);
		} else {
			q->req[keep++] = *l;
		}
	}
	q->n = keep;
}
