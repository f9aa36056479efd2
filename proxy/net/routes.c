/* Routes (see routes.h). */
#include "proxy/net/routes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "proxy/net/srv.h"
#include "proxy/sinks/log.h"

static bool has_host(const upstream_host *hosts, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (!strcasecmp(hosts[i].name, name))
			return true;
	return false;
}

static bool names_member(const routes_spec *spec, const char *name)
{
	for (size_t i = 0; i < spec->n; i++)
		if (!strcasecmp(spec->l[i].member, name))
			return true;
	return false;
}

/* The URI host net.listen serves. A plain URI: its first host, as
 * written. An SRV answer has no order worth keeping (the spec ignores
 * priority, servers rotate records): the host it had while still there,
 * else the first by name that no upstream.members entry claims. */
static const upstream_host *first_host(const routes_spec *spec, const upstream_routes *r,
                                       const upstream_routes *prev, size_t self)
{
	if (!r->srv)
		return &r->hosts[0];
	const upstream_host *best = NULL;
	for (size_t i = 0; i < r->nhosts; i++) {
		const upstream_host *h = &r->hosts[i];
		if (prev && self < prev->n && !strcasecmp(prev->target[self].name, h->name))
			return h;
		bool claimed = names_member(spec, h->name);
		bool best_claimed = best && names_member(spec, best->name);
		if (!best || (best_claimed && !claimed) ||
		    (best_claimed == claimed && strcasecmp(h->name, best->name) < 0))
			best = h;
	}
	return best;
}

static bool in_map(const upstream_routes *r, const char *member)
{
	for (size_t i = 0; i < r->nmap; i++)
		if (!strcasecmp(r->map[i].member, member))
			return true;
	return false;
}

static void map_add(upstream_routes *r, const char *member, const char *listen)
{
	if (in_map(r, member)) /* the first listener named so keeps it */
		return;
	hello_map_entry *e = &r->map[r->nmap++];
	snprintf(e->member, sizeof(e->member), "%s", member);
	snprintf(e->listen, sizeof(e->listen), "%s", listen);
}

/* The names first, so an address never shadows a name. */
static void build_map(const routes_spec *spec, upstream_routes *r)
{
	for (size_t i = 0; i < r->n; i++)
		map_add(r, r->target[i].name, spec->l[i].advertise);
	for (size_t i = 0; i < r->n; i++) {
		char addr[80];
		const struct sockaddr *sa = (const struct sockaddr *)&r->target[i].ss;
		if (sa->sa_family != AF_INET && sa->sa_family != AF_INET6)
			continue;
		net_format_addr(sa, addr, sizeof(addr));
		map_add(r, addr, spec->l[i].advertise);
	}
	for (size_t i = 0; i < r->n; i++)
		r->hello[i] = (hello_map){r->map, r->nmap, spec->l[i].advertise, r->target[i].name};
}

upstream_routes *routes_resolve(const routes_spec *spec, const upstream_routes *prev, char *err,
                                size_t errlen)
{
	upstream_routes *r = calloc(1, sizeof(*r));
	if (!r) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	refcount_init(&r->refs);
	r->srv = srv_is_srv_uri(spec->uri);
	bool ok = r->srv
	              ? srv_expand(spec->uri, spec->dns_server, r->uri, sizeof(r->uri), err, errlen)
	              : (size_t)snprintf(r->uri, sizeof(r->uri), "%s", spec->uri) < sizeof(r->uri);
	ok = ok && upstream_parse(r->uri, &r->info, r->hosts, &r->nhosts, err, errlen);
	r->n = spec->n;
	for (size_t i = 0; ok && i < spec->n; i++) {
		upstream_host member;
		const upstream_host *h = &member;
		if (spec->l[i].member[0])
			ok = upstream_parse_host(spec->l[i].member, &member, err, errlen);
		else
			h = first_host(spec, r, prev, i);
		ok = ok && upstream_lookup(h, spec->dns_server, &r->target[i], err, errlen);
	}
	if (!ok) {
		free(r);
		return NULL;
	}
	build_map(spec, r);
	return r;
}

upstream_routes *routes_ref(upstream_routes *r)
{
	refcount_take(&r->refs);
	return r;
}

void routes_unref(upstream_routes *r)
{
	if (r && refcount_drop(&r->refs))
		free(r);
}

static bool same_target(const upstream_target *a, const upstream_target *b)
{
	return !strcasecmp(a->name, b->name) && a->len == b->len && !memcmp(&a->ss, &b->ss, a->len);
}

bool routes_same(const upstream_routes *a, const upstream_routes *b)
{
	if (a->nhosts != b->nhosts || a->n != b->n)
		return false;
	for (size_t i = 0; i < a->nhosts; i++)
		if (!has_host(b->hosts, b->nhosts, a->hosts[i].name))
			return false;
	for (size_t i = 0; i < a->n; i++)
		if (!same_target(&a->target[i], &b->target[i]))
			return false;
	return true;
}

static void host_list(const upstream_host *hosts, size_t n, char *out, size_t size)
{
	size_t used = 0;
	out[0] = '\0';
	for (size_t i = 0; i < n && used < size; i++)
		used +=
		    (size_t)snprintf(out + used, size - used, "%s%s", i ? "," : "", hosts[i].name);
}

static bool served(const upstream_routes *r, const char *name)
{
	for (size_t i = 0; i < r->n; i++)
		if (!strcasecmp(r->target[i].name, name))
			return true;
	return false;
}

void routes_log_change(const routes_spec *spec, const upstream_routes *was,
                       const upstream_routes *now, const char *trigger)
{
	char a[2048], b[2048];
	if (was) {
		host_list(was->hosts, was->nhosts, a, sizeof(a));
		host_list(now->hosts, now->nhosts, b, sizeof(b));
		log_line *l =
		    log_begin(LOG_INFO, "NETWORK", LOGID_LISTENING, NULL,
		              "Upstream hosts changed in DNS; connections accepted from now "
		              "on use the new answer");
		log_attr_str(l, "was", a);
		log_attr_str(l, "now", b);
		log_attr_str(l, "trigger", trigger ? trigger : "");
		log_end(l);
		for (size_t i = 0; i < now->n; i++) {
			if (same_target(&was->target[i], &now->target[i]))
				continue;
			char wa[80], na[80];
			net_format_addr((const struct sockaddr *)&was->target[i].ss, wa,
			                sizeof(wa));
			net_format_addr((const struct sockaddr *)&now->target[i].ss, na,
			                sizeof(na));
			l = log_begin(LOG_INFO, "NETWORK", LOGID_LISTENING, NULL,
			              "Listener paired with upstream server");
			log_attr_str(l, "listen", spec->l[i].listen);
			log_attr_str(l, "upstream", now->target[i].name);
			log_attr_str(l, "address", na);
			log_attr_str(l, "wasUpstream", was->target[i].name);
			log_attr_str(l, "wasAddress", wa);
			log_end(l);
		}
	}
	if (!was && now->srv) {
		host_list(now->hosts, now->nhosts, b, sizeof(b));
		log_line *l = log_begin(LOG_INFO, "NETWORK", LOGID_LISTENING, NULL,
		                        "Upstream hosts found through DNS (mongodb+srv://)");
		log_attr_str(l, "hosts", b);
		log_attr_str(l, "replicaSet", now->info.replica_set);
		log_attr_bool(l, "loadBalanced", now->info.load_balanced);
		log_attr_bool(l, "tls", now->info.tls.enabled);
		log_end(l);
	}
	for (size_t i = 0; i < now->nhosts; i++) {
		const char *h = now->hosts[i].name;
		if (served(now, h) || (was && has_host(was->hosts, was->nhosts, h)))
			continue;
		log_line *l = log_begin(
		    LOG_WARNING, "NETWORK", LOGID_HELLO_REWRITE, NULL,
		    "Upstream host has no mongoguard listener: hello replies leave it out, "
		    "and a client that reaches it does so around mongoguard");
		log_attr_str(l, "host", h);
		log_attr_str(l, "fix", "add it to upstream.members with a listen address");
		log_end(l);
	}
}

static void slot_retain(void *r)
{
	routes_ref(r);
}

static void slot_release(void *r)
{
	routes_unref(r);
}

static const ref_slot_ops routes_slot_ops = {slot_retain, slot_release};

void routes_slot_init(routes_slot *rs, upstream_routes *first)
{
	ref_slot_init(&rs->s, &routes_slot_ops, first);
}

void routes_slot_destroy(routes_slot *rs)
{
	ref_slot_destroy(&rs->s);
}

upstream_routes *routes_slot_get(routes_slot *rs)
{
	return ref_slot_get(&rs->s);
}

void routes_slot_publish(routes_slot *rs, upstream_routes *r)
{
	ref_slot_publish(&rs->s, r);
}
