/* Telling systemd where mongoguard is (Type=notify): READY=1 once it
 * listens, RELOADING=1 and READY=1 around a reload, STOPPING=1 when a
 * shutdown begins. The protocol is one datagram to the AF_UNIX socket named
 * by $NOTIFY_SOCKET (a path, or an abstract name after '@'); without that
 * variable nothing is sent, so outside systemd this costs nothing. No
 * libsystemd: the datagram is all there is to it. */
#ifndef MG_PROXY_RUNTIME_SD_NOTIFY_H
#define MG_PROXY_RUNTIME_SD_NOTIFY_H

#include <stdbool.h>

/* Sends state (e.g. "READY=1\nSTATUS=listening") to the service manager.
 * True when it was sent, false when there is no manager or it failed;
 * callers go on either way (a unit that is not Type=notify ignores it). */
bool sd_notify_send(const char *state);

#endif
