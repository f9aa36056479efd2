/* Which database the index cache's side connection is fetching from, and
 * which have a client's schema-changing request in flight, so the two
 * never overlap within a database (index_cache.h explains why). The index
 * cache keeps one under its lock; these functions take none. */
#ifndef MG_ANALYZERS_CATALOG_SIDE_GATES_H
#define MG_ANALYZERS_CATALOG_SIDE_GATES_H

#include <stdbool.h>
#include <stdint.h>

#define SIDE_GATES        32
#define SIDE_GATES_DB_MAX 128 /* the server allows 64 */

typedef struct side_gates {
	char side_db[SIDE_GATES_DB_MAX]; /* "" when the side connection is idle */
	struct {
		char db[SIDE_GATES_DB_MAX];
		uint32_t n; /* requests in flight; 0: a free slot */
	} at[SIDE_GATES];
	int used; /* slots with n > 0 */
} side_gates;

/* Is the side connection fetching from db? */
bool side_gates_busy(const side_gates *g, const char *db);
/* The side connection starts a fetch of ns ("db.coll"); NULL: it is idle. */
void side_gates_fetching(side_gates *g, const char *ns);
/* Does ns ("db.coll") lie in a database with a client's request in flight? */
bool side_gates_held(const side_gates *g, const char *ns);
/* A client's request to db begins: its slot, or -1 when db is too long or
 * every slot holds another database. */
int side_gates_begin(side_gates *g, const char *db);
/* It ended: true when it was its database's last. */
bool side_gates_end(side_gates *g, int slot);

#endif
