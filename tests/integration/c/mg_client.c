/* The libmongoc side of mongoguard's integration tests.
 *
 *   mg_client URI DBNAME SCENARIO
 *
 * Runs one scenario and prints what the application observed as one line of
 * canonical Extended JSON, so pytest can compare a direct run with a run
 * through mongoguard. Compression is chosen in the URI
 * (?compressors=snappy|zlib|zstd). Exit status 0 unless the scenario failed
 * unexpectedly (the reason is on stderr). */
#include <mongoc/mongoc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, __VA_ARGS__);                                              \
			fputc('\n', stderr);                                                       \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)

/* Appends every document a cursor returns to an array under key in out,
 * and returns how many there were. */
static int64_t drain(mongoc_cursor_t *cursor, bson_t *out, const char *key)
{
	bson_t arr;
	const bson_t *doc;
	bson_error_t err;
	int64_t n = 0;
	char idx[24];

	bson_append_array_begin(out, key, -1, &arr);
	while (mongoc_cursor_next(cursor, &doc)) {
		snprintf(idx, sizeof idx, "%" PRId64, n++);
		bson_append_document(&arr, idx, -1, doc);
	}
	bson_append_array_end(out, &arr);
	CHECK(!mongoc_cursor_error(cursor, &err), "cursor: %s", err.message);
	mongoc_cursor_destroy(cursor);
	return n;
}

static void append_error(bson_t *out, const char *key, const bson_error_t *err)
{
	bson_t e;

	bson_append_document_begin(out, key, -1, &e);
	BSON_APPEND_INT32(&e, "code", (int32_t)err->code);
	bson_append_document_end(out, &e);
}

static void scenario_crud(mongoc_client_t *client, const char *dbname, bson_t *out)
{
	mongoc_collection_t *c = mongoc_client_get_collection(client, dbname, "people");
	bson_error_t err;
	bson_t reply;
	bson_t *docs[100];
	bson_t *filter, *opts, *update;

	for (int i = 0; i < 100; i++)
		docs[i] = BCON_NEW("_id", BCON_INT32(i), "age", BCON_INT32(i % 40), "grp",
		                   BCON_INT32(i % 7));
	CHECK(mongoc_collection_insert_many(c, (const bson_t **)docs, 100, NULL, &reply, &err),
	      "insert_many: %s", err.message);
	bson_append_document(out, "insertMany", -1, &reply);
	bson_destroy(&reply);
	for (int i = 0; i < 100; i++)
		bson_destroy(docs[i]);

	filter = BCON_NEW("age", "{", "$gte", BCON_INT32(30), "}");
	opts = BCON_NEW("sort", "{", "age", BCON_INT32(-1), "_id", BCON_INT32(1), "}", "projection",
	                "{", "age", BCON_INT32(1), "}");
	drain(mongoc_collection_find_with_opts(c, filter, opts, NULL), out, "find");
	bson_destroy(filter);
	bson_destroy(opts);

	filter = BCON_NEW("grp", BCON_INT32(2));
	update = BCON_NEW("$inc", "{", "age", BCON_INT32(100), "}");
	CHECK(mongoc_collection_update_many(c, filter, update, NULL, &reply, &err),
	      "update_many: %s", err.message);
	bson_append_document(out, "updateMany", -1, &reply);
	bson_destroy(&reply);
	bson_destroy(filter);
	bson_destroy(update);

	filter = BCON_NEW("grp", BCON_INT32(5));
	CHECK(mongoc_collection_delete_many(c, filter, NULL, &reply, &err), "delete_many: %s",
	      err.message);
	bson_append_document(out, "deleteMany", -1, &reply);
	bson_destroy(&reply);
	bson_destroy(filter);

	filter = BCON_NEW("grp", BCON_INT32(3));
	BSON_APPEND_INT64(out, "count",
	                  mongoc_collection_count_documents(c, filter, NULL, NULL, NULL, &err));
	bson_destroy(filter);

	docs[0] = BCON_NEW("_id", BCON_INT32(1));
	if (mongoc_collection_insert_one(c, docs[0], NULL, NULL, &err))
		BSON_APPEND_UTF8(out, "dup", "no error");
	else
		append_error(out, "dup", &err);
	bson_destroy(docs[0]);

	opts = BCON_NEW("sort", "{", "_id", BCON_INT32(1), "}");
	filter = bson_new();
	drain(mongoc_collection_find_with_opts(c, filter, opts, NULL), out, "final");
	bson_destroy(filter);
	bson_destroy(opts);
	mongoc_collection_destroy(c);
}

static void scenario_cursor(mongoc_client_t *client, const char *dbname, bson_t *out)
{
	mongoc_collection_t *c = mongoc_client_get_collection(client, dbname, "big");
	mongoc_bulk_operation_t *bulk = mongoc_collection_create_bulk_operation_with_opts(c, NULL);
	bson_error_t err;
	bson_t reply;
	const bson_t *doc;
	int64_t n = 0, sum = 0;
	bson_iter_t it;

	for (int i = 0; i < 5000; i++) {
		bson_t *d = BCON_NEW("_id", BCON_INT32(i), "v", BCON_INT32(i * 3));
		mongoc_bulk_operation_insert(bulk, d);
		bson_destroy(d);
	}
	CHECK(mongoc_bulk_operation_execute(bulk, &reply, &err), "bulk: %s", err.message);
	bson_destroy(&reply);
	mongoc_bulk_operation_destroy(bulk);

	bson_t *filter = bson_new();
	bson_t *opts = BCON_NEW("batchSize", BCON_INT32(7), "sort", "{", "_id", BCON_INT32(1), "}");
	mongoc_cursor_t *cursor = mongoc_collection_find_with_opts(c, filter, opts, NULL);
	while (mongoc_cursor_next(cursor, &doc)) {
		CHECK(bson_iter_init_find(&it, doc, "_id") && bson_iter_as_int64(&it) == n,
		      "document %" PRId64 " out of order", n);
		bson_iter_init_find(&it, doc, "v");
		sum += bson_iter_as_int64(&it);
		n++;
	}
	CHECK(!mongoc_cursor_error(cursor, &err), "cursor: %s", err.message);
	mongoc_cursor_destroy(cursor);
	bson_destroy(filter);
	bson_destroy(opts);
	BSON_APPEND_INT64(out, "n", n);
	BSON_APPEND_INT64(out, "sum", sum);
	mongoc_collection_destroy(c);
}

static void scenario_aggregate(mongoc_client_t *client, const char *dbname, bson_t *out)
{
	mongoc_collection_t *c = mongoc_client_get_collection(client, dbname, "sales");
	bson_error_t err;
	bson_t *docs[200];

	for (int i = 0; i < 200; i++)
		docs[i] = BCON_NEW("_id", BCON_INT32(i), "item", BCON_INT32(i % 5), "qty",
		                   BCON_INT32(i % 9));
	CHECK(mongoc_collection_insert_many(c, (const bson_t **)docs, 200, NULL, NULL, &err),
	      "insert_many: %s", err.message);
	for (int i = 0; i < 200; i++)
		bson_destroy(docs[i]);
	bson_t *pipeline = BCON_NEW(
	    "pipeline", "[", "{", "$match", "{", "qty", "{", "$gt", BCON_INT32(2), "}", "}", "}",
	    "{", "$group", "{", "_id", BCON_UTF8("$item"), "total", "{", "$sum", BCON_UTF8("$qty"),
	    "}", "}", "}", "{", "$sort", "{", "_id", BCON_INT32(1), "}", "}", "]");
	bson_t *opts = BCON_NEW("batchSize", BCON_INT32(2));
	drain(mongoc_collection_aggregate(c, MONGOC_QUERY_NONE, pipeline, opts, NULL), out,
	      "group");
	bson_destroy(pipeline);
	bson_destroy(opts);
	mongoc_collection_destroy(c);
}

/* Unacknowledged writes, then an acknowledged count on the same client
 * (libmongoc's single-threaded client keeps one connection per server). */
static void scenario_w0(mongoc_client_t *client, const char *dbname, bson_t *out)
{
	mongoc_collection_t *c = mongoc_client_get_collection(client, dbname, "w0");
	mongoc_write_concern_t *wc = mongoc_write_concern_new();
	bson_t opts = BSON_INITIALIZER;
	bson_error_t err;
	int64_t n = -1;

	mongoc_write_concern_set_w(wc, MONGOC_WRITE_CONCERN_W_UNACKNOWLEDGED);
	mongoc_write_concern_append(wc, &opts);
	for (int i = 0; i < 100; i++) {
		bson_t *d = BCON_NEW("_id", BCON_INT32(i));
		CHECK(mongoc_collection_insert_one(c, d, &opts, NULL, &err), "w0 insert: %s",
		      err.message);
		bson_destroy(d);
	}
	bson_t *filter = bson_new();
	for (int tries = 0; tries < 200; tries++) {
		n = mongoc_collection_count_documents(c, filter, NULL, NULL, NULL, &err);
		CHECK(n >= 0, "count: %s", err.message);
		if (n == 100)
			break;
		usleep(50 * 1000);
	}
	BSON_APPEND_INT64(out, "n", n);
	bson_destroy(filter);
	bson_destroy(&opts);
	mongoc_write_concern_destroy(wc);
	mongoc_collection_destroy(c);
}

/* Which compressor the handshake negotiated, as the server (or mongoguard)
 * answered it, and a round trip that would be compressed if one was. */
static void scenario_hello(mongoc_client_t *client, const char *dbname, bson_t *out)
{
	bson_t *cmd = BCON_NEW("hello", BCON_INT32(1));
	bson_t reply;
	bson_error_t err;
	bson_iter_t it;

	CHECK(mongoc_client_command_simple(client, "admin", cmd, NULL, &reply, &err), "hello: %s",
	      err.message);
	BSON_APPEND_BOOL(out, "ok", true);
	BSON_APPEND_BOOL(out, "hasCompression", bson_iter_init_find(&it, &reply, "compression"));
	bson_destroy(&reply);
	bson_destroy(cmd);
	(void)dbname;
}

int main(int argc, char **argv)
{
	bson_error_t err;
	bson_t out = BSON_INITIALIZER;

	if (argc != 4) {
		fprintf(stderr, "usage: %s URI DBNAME crud|cursor|aggregate|w0|hello\n", argv[0]);
		return 2;
	}
	mongoc_init();
	mongoc_uri_t *uri = mongoc_uri_new_with_error(argv[1], &err);
	CHECK(uri, "bad URI: %s", err.message);
	mongoc_client_t *client = mongoc_client_new_from_uri_with_error(uri, &err);
	CHECK(client, "client: %s", err.message);
	mongoc_client_set_error_api(client, MONGOC_ERROR_API_VERSION_2);
	if (!mongoc_uri_get_appname(uri))
		(void)mongoc_client_set_appname(client, "mg_client");

	const char *s = argv[3];
	if (strcmp(s, "crud") == 0)
		scenario_crud(client, argv[2], &out);
	else if (strcmp(s, "cursor") == 0)
		scenario_cursor(client, argv[2], &out);
	else if (strcmp(s, "aggregate") == 0)
		scenario_aggregate(client, argv[2], &out);
	else if (strcmp(s, "w0") == 0)
		scenario_w0(client, argv[2], &out);
	else if (strcmp(s, "hello") == 0)
		scenario_hello(client, argv[2], &out);
	else
		CHECK(0, "unknown scenario %s", s);

	char *json = bson_as_canonical_extended_json(&out, NULL);
	puts(json);
	bson_free(json);
	bson_destroy(&out);
	mongoc_client_destroy(client);
	mongoc_uri_destroy(uri);
	mongoc_cleanup();
	return 0;
}
