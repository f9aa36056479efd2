/* A deterministic session harness: a real session (proxy/session/, the
 * code the workers run) on a real libevent base, its client and upstream
 * real sockets whose other ends the harness holds, and a virtual clock.
 *
 *   - The client is one end of a socketpair; the harness writes what a
 *     test scripts (plain bytes, or TLS through an OpenSSL client on
 *     memory BIOs, so its ciphertext can be cut anywhere) and reads what
 *     the session sends back.
 *   - The upstream is an abstract AF_UNIX listener the session dials; the
 *     harness accepts and answers every OP_MSG (and OP_QUERY) that wants a
 *     reply with {ok: 1}, unless told to stay mute. It can speak TLS
 *     (hx_world_tls_upstream): a server on memory BIOs, whose records
 *     (one per reply) wait in a buffer and go to the socket together at
 *     the end of the harness's turn, as much as the socket takes.
 *   - Time: this file defines clock_gettime, which the test executable's
 *     own calls and libevent's (a shared library) resolve to. While a
 *     world exists, the monotonic clocks stand still except when the
 *     harness advances them (hx_advance); the others are the real ones.
 *   - Work: hx_run turns the loop (EVLOOP_ONCE | EVLOOP_NONBLOCK) until it
 *     is quiet: two turns in a row in which epoll reported nothing, no
 *     session callback ran and the harness's peers had nothing to do. It
 *     counts the session callbacks (session_callbacks_run) and the
 *     readiness epoll reported (this file also defines epoll_wait), so a
 *     callback that runs again and again shows as a count out of
 *     proportion, and a loop that never quiets makes hx_run fail.
 *
 * One world at a time, single-threaded. */
#ifndef MG_TESTS_UNIT_SESSION_HARNESS_H
#define MG_TESTS_UNIT_SESSION_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proxy/session/session.h"

enum {
	HX_MAX_TURNS = 5000, /* hx_run gives up (a spin) after this many busy turns */
	HX_FRAME_WAIT_MS = 60000,
	HX_REPLY_TIMEOUT_MS = 30000,
	HX_BUF = 256 * 1024,
};

typedef struct hx_world hx_world;

typedef struct hx_conn {
	hx_world *w;
	session *s;   /* NULL once the session is freed */
	bool closed;  /* on_closed ran */
	uint64_t id;  /* the session's number: its log ctx is "conn<id>" */
	int cfd;      /* the harness's end of the client's socketpair (-1: closed) */
	int ufd;      /* the upstream connection, accepted (-1: none yet) */
	bool mute;    /* the upstream never answers */
	bool up_gone; /* the upstream closed (hx_upstream_close) and takes no more */
	bool no_read; /* the client does not read what the session sends */
	bool client_eof;
	/* TLS client (memory BIOs): its ciphertext goes to out, what comes
	 * from the socket goes to rbio. */
	void *ssl, *rbio, *wbio;
	bool tls_done;   /* the client finished its handshake */
	uint64_t hs_end; /* ciphertext bytes produced when it did */
	/* Bytes queued for the socket, not yet written (hx_deliver). */
	uint8_t *out;
	size_t out_len;
	uint64_t produced, delivered; /* bytes queued for / written to the socket */
	/* What reached the client (plaintext for TLS), all of it. */
	uint8_t *got;
	size_t got_len, got_cap;
	/* The upstream's input not yet answered, and the count answered. */
	uint8_t *up_in;
	size_t up_len;
	uint64_t requests_seen, replies_sent;
	size_t reply_pad; /* each {ok: 1} carries a string "pad" this long */
	/* A TLS upstream (hx_world_tls_upstream): its server (memory BIOs)
	 * and the ciphertext not yet written to the socket. */
	void *up_ssl, *up_rbio, *up_wbio;
	bool up_tls, up_tls_done;
	uint8_t *up_out;
	size_t up_out_len, up_out_cap;
	/* The end the upstream writes behind a reply (hx_upstream_end_after). */
	uint64_t up_end_after;
	bool up_end_notify, up_end_close, up_end_queued;
	bool up_end_reset; /* the close resets (hx_upstream_reset_after) */
	/* Every byte the upstream read, in order: how many and their FNV-1a
	 * hash (however the reads cut them). */
	uint64_t up_seen, up_hash;
	/* Counted from the conn's start. */
	uint64_t cb0, ep0, turns;
} hx_conn;

/* tls: the listener takes TLS and plain clients (net.tls.mode allowTLS)
 * with a throwaway certificate made in-process. log_path: where the
 * structured log goes (NULL: /dev/null). */
hx_world *hx_world_new(bool tls, const char *log_path);
void hx_world_free(hx_world *w);
/* The upstream's listener goes: connects from here on are refused. */
void hx_world_refuse(hx_world *w);
/* Sessions started from here on reach the upstream over TLS, configured
 * as a URI's tls=true with tlsCAFile (tls_build): the harness's throwaway
 * certificate is the CA, and the host name (harness-upstream) is checked
 * against it. The scripted upstream answers as a TLS server. */
void hx_world_tls_upstream(hx_world *w);
/* The configuration in force for sessions started after a change. */
struct mg_config *hx_config(hx_world *w);
/* Analysis on: sessions judge requests with e (the world frees it). */
void hx_world_engine(hx_world *w, struct engine *e);
/* The counters the world's sessions add to (a worker's shard). */
const struct metrics_shard *hx_metrics(const hx_world *w);
/* Workload statistics on, as a worker keeps them, for sessions started
 * after (the world frees wl); and the table they write. */
void hx_world_workload(hx_world *w, struct workload *wl);
const struct workload *hx_workload(const hx_world *w);

/* A session accepted on a new socketpair, run until quiet. */
hx_conn *hx_conn_start(hx_world *w);
/* Ends the session if it is still open (session_abort), runs until it is
 * freed, closes the harness's sockets. */
void hx_conn_free(hx_conn *c);

/* Turns the loop until quiet; false when it never got there (a spin). */
bool hx_run(hx_conn *c);
/* Virtual time passes, in steps of at most step_ms, the loop run until
 * quiet after each; false when a run never got quiet. */
bool hx_advance(hx_conn *c, uint64_t ms, uint64_t step_ms);
int64_t hx_now_ms(void);

/* The client's side. */
void hx_queue_raw(hx_conn *c, const void *p, size_t n); /* bytes as they are */
/* plaintext: as is without TLS, through the client's SSL with it (queued
 * until its handshake is done). */
void hx_queue_app(hx_conn *c, const void *p, size_t n);
/* Starts the TLS client: its ClientHello is queued. */
void hx_tls_begin(hx_conn *c);
/* Writes up to n queued bytes to the socket; returns how many went. */
size_t hx_deliver(hx_conn *c, size_t n);
/* Everything queued, written; then run until quiet. */
bool hx_flush(hx_conn *c);
/* The TLS handshake driven to the end: true when both ends finished. */
bool hx_tls_handshake(hx_conn *c);
/* The TLS client's close_notify, queued after what it wrote. */
void hx_tls_close_notify(hx_conn *c);
void hx_client_shutdown(hx_conn *c); /* SHUT_WR: the client says it is done */
void hx_client_close(hx_conn *c);
/* The upstream closes its connection, and any the session makes later. */
void hx_upstream_close(hx_conn *c);
/* The upstream ends right behind its nth reply (counted from the conn's
 * start; at once if it has sent that many), in the same write, and
 * answers nothing more: close_notify when notify (a TLS upstream), then,
 * when close, the socket's close (hx_upstream_close) once everything
 * before it is written. */
void hx_upstream_end_after(hx_conn *c, uint64_t nth, bool notify, bool close);

/* The same end as a reset: once its nth reply is queued the upstream reads
 * no more, and writes what it queued and closes in one turn when bytes it
 * has not read wait on its socket (the session sent one more request), so
 * the session's reads meet those replies and then ECONNRESET (a Unix
 * socket closed with unread bytes resets its peer). */
void hx_upstream_reset_after(hx_conn *c, uint64_t nth);

/* Work counted since the conn started: session callbacks, epoll readiness. */
uint64_t hx_callbacks(const hx_conn *c);
uint64_t hx_epoll_events(const hx_conn *c);

/* An OP_MSG {ping: 1, $db: "admin"} with this requestID; returns its length. */
size_t hx_ping(uint8_t *buf, int32_t request_id);
/* The length of the OP_MSG reply the upstream writes now (reply_pad counted). */
size_t hx_reply_len(const hx_conn *c);
/* The number of whole replies the client got whose responseTo is request_id. */
int hx_replies_to(const hx_conn *c, int32_t request_id);

/* The log line with this id for the conn ("ctx":"conn<id>") that contains
 * text, or NULL: a malloc'd copy. */
char *hx_log_line(hx_world *w, const hx_conn *c, int log_id, const char *text);

#endif
