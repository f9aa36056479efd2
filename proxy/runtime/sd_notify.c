/* The service manager's notification datagram (sd_notify.h). */
#include "proxy/runtime/sd_notify.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

bool sd_notify_send(const char *state)
{
	const char *path = getenv("NOTIFY_SOCKET");
	if (!path || !path[0])
		return false;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	size_t n = strlen(path);
	/* '@' names an abstract socket: a leading NUL in sun_path. */
	if ((path[0] != '/' && path[0] != '@') || n >= sizeof(sa.sun_path))
		return false;
	memcpy(sa.sun_path, path, n);
	if (path[0] == '@')
		sa.sun_path[0] = '\0';
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return false;
	socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n);
	ssize_t w;
	do
		w = sendto(fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&sa, len);
	while (w < 0 && errno == EINTR);
	close(fd);
	return w == (ssize_t)strlen(state);
}
