/* libFuzzer target: the input is a YAML configuration file, loaded by
 * config_load_file (proxy/runtime/config.c) over the defaults. It must
 * either load or fail with a terminated, non-empty error message; leaks
 * are LeakSanitizer's to find. The file is a memfd, rewritten per input,
 * so the loader reads it through its own fopen. mongo.dict and
 * config.dict hold the real keys (README, configs/). */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "proxy/runtime/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int fd = -1;
	static char path[64];
	if (fd < 0) {
		fd = memfd_create("fuzz_config.yaml", 0);
		if (fd < 0)
			abort();
		snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
	}
	if (ftruncate(fd, 0) != 0 || (size && pwrite(fd, data, size, 0) != (ssize_t)size))
		abort();
	static mg_config c; /* large: not on the stack */
	config_defaults(&c);
	char err[1024];
	memset(err, 0, sizeof err);
	if (config_load_file(&c, path, err, sizeof err)) {
		if (c.nmembers > MG_MAX_MEMBERS)
			abort();
	} else if (err[0] == '\0' || strnlen(err, sizeof err) == sizeof err) {
		abort(); /* a failure must say why */
	}
	return 0;
}
