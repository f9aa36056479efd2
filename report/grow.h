/* The model's growable arrays: room for one more row, doubling. */
#ifndef MG_REPORT_GROW_H
#define MG_REPORT_GROW_H

#include <stdlib.h>

#define REPORT_GROW(arr, n, cap)                                                                   \
	do {                                                                                       \
		if ((n) == (cap)) {                                                                \
			size_t nc = (cap) ? (cap)*2 : 16;                                          \
			void *np = realloc((arr), nc * sizeof(*(arr)));                            \
			if (!np)                                                                   \
				abort(); /* the report has nothing sensible to do */               \
			(arr) = np;                                                                \
			(cap) = nc;                                                                \
		}                                                                                  \
	} while (0)

#endif
