/* Replays a fuzz corpus without libFuzzer: feeds every regular file of the
 * directories (or files) given on the command line to
 * LLVMFuzzerTestOneInput, once each. Built by the normal test build with the
 * project's compiler, so CI (gcc, ASan) re-runs every input the fuzzers found
 * interesting, and every crash fixed since stays fixed. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

/* A proxy decodes requests inline: an input that takes seconds is a bug
 * (timeout-* files in the corpus are such bugs, fixed). Fixed inputs take
 * under a second even under ASan; this limit leaves room for slow CI. It
 * is the process's CPU time, not the wall clock: a loaded machine (CI's
 * two cores running the suite's other steps) stretches the wall clock of
 * an input that is not slow, and a test must not fail for that. */
#define REPLAY_MAX_SECONDS 10.0

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		perror(path);
		return 1;
	}
	uint8_t *buf = NULL;
	size_t len = 0, cap = 0;
	for (;;) {
		if (len == cap) {
			cap = cap ? cap * 2 : 4096;
			uint8_t *grown = realloc(buf, cap);
			if (!grown) {
				free(buf);
				fclose(f);
				return 1;
			}
			buf = grown;
		}
		size_t n = fread(buf + len, 1, cap - len, f);
		if (n == 0)
			break;
		len += n;
	}
	fclose(f);
	/* an exact-size copy, so a read past the input is a sanitizer error
	 * here as it is under libFuzzer */
	uint8_t *exact = malloc(len ? len : 1);
	if (!exact) {
		free(buf);
		return 1;
	}
	if (len)
		memcpy(exact, buf, len);
	free(buf);
	struct timespec t0, t1;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t0);
	LLVMFuzzerTestOneInput(exact, len);
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t1);
	free(exact);
	double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	if (secs > REPLAY_MAX_SECONDS) {
		fprintf(stderr, "%s: took %.1f s of CPU, over the %.0f s limit\n", path, secs,
		        REPLAY_MAX_SECONDS);
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	int failures = 0;
	size_t count = 0;
	for (int i = 1; i < argc; i++) {
		struct stat st;
		if (stat(argv[i], &st) != 0) {
			perror(argv[i]);
			return 1;
		}
		if (!S_ISDIR(st.st_mode)) {
			failures += run_file(argv[i]);
			count++;
			continue;
		}
		DIR *d = opendir(argv[i]);
		if (!d) {
			perror(argv[i]);
			return 1;
		}
		struct dirent *e;
		while ((e = readdir(d))) {
			char path[4096];
			snprintf(path, sizeof path, "%s/%s", argv[i], e->d_name);
			if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
				continue;
			failures += run_file(path);
			count++;
		}
		closedir(d);
	}
	printf("replayed %zu inputs\n", count);
	if (count == 0) {
		fprintf(stderr, "no inputs found\n");
		return 1;
	}
	return failures ? 1 : 0;
}
