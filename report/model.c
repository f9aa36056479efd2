/* The model's memory (model.h): what the aggregator and the report's
 * passes allocated in it, freed. */
#include <stdlib.h>
#include <string.h>

#include "report/model.h"

void model_free(model *m)
{
	for (size_t i = 0; i < m->nshapes; i++) {
		free(m->shapes[i].lat_us);
		free(m->shapes[i].lat_t);
	}
	free(m->tl_ev);
	for (size_t i = 0; i < m->nnss; i++) {
		free(m->nss[i].push);
		free(m->nss[i].add_to_set);
		for (size_t k = 0; k < m->nss[i].narrays; k++) {
			free(m->nss[i].arrays[k].sample_t);
			free(m->nss[i].arrays[k].sample_len);
		}
		free(m->nss[i].arrays);
		free(m->nss[i].used);
		free(m->nss[i].indexes);
	}
	for (size_t i = 0; i < m->nrecs; i++)
		free(m->recs[i].shapes);
	free(m->recs);
	free(m->spans);
	free(m->rels);
	free(m->shapes);
	free(m->findings);
	free(m->nss);
	free(m->apps);
	free(m->dbs);
	free(m->inputs);
	free(m->per_sec);
	memset(m, 0, sizeof *m);
}
