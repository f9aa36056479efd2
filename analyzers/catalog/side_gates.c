/* The side connection's gates: see side_gates.h. */
#include "analyzers/catalog/side_gates.h"

#include <string.h>

bool side_gates_busy(const side_gates *g, const char *db)
{
	return g->side_db[0] != '\0' && strcmp(g->side_db, db) == 0;
}

void side_gates_fetching(side_gates *g, const char *ns)
{
	const char *dot = ns ? strchr(ns, '.') : NULL;
	size_t dblen = dot ? (size_t)(dot - ns) : 0;
	if (dblen >= sizeof(g->side_db))
		dblen = 0; /* the cache never lets one so long in */
	if (dblen > 0)
		memcpy(g->side_db, ns, dblen);
	g->side_db[dblen] = '\0';
}

bool side_gates_held(const side_gates *g, const char *ns)
{
	const char *dot = strchr(ns, '.');
	size_t len = dot ? (size_t)(dot - ns) : strlen(ns);
	if (g->used == 0)
		return false;
	for (int i = 0; i < SIDE_GATES; i++)
		if (g->at[i].n > 0 && strncmp(g->at[i].db, ns, len) == 0 &&
		    g->at[i].db[len] == '\0')
			return true;
	return false;
}

int side_gates_begin(side_gates *g, const char *db)
{
	int slot = -1;
	if (db == NULL || db[0] == '\0' || strlen(db) >= SIDE_GATES_DB_MAX)
		return -1;
	/* db's own slot when it has one, else the first free one */
	for (int i = 0, seen = 0; i < SIDE_GATES && (seen < g->used || slot < 0); i++) {
		if (g->at[i].n == 0) {
			if (slot < 0)
				slot = i;
			continue;
		}
		seen++;
		if (strcmp(g->at[i].db, db) == 0) {
			slot = i;
			break;
		}
	}
	if (slot >= 0 && g->at[slot].n++ == 0) {
		memcpy(g->at[slot].db, db, strlen(db) + 1);
		g->used++;
	}
	return slot;
}

bool side_gates_end(side_gates *g, int slot)
{
	if (slot < 0 || slot >= SIDE_GATES || g->at[slot].n == 0 || --g->at[slot].n > 0)
		return false;
	g->used--;
	return true;
}
