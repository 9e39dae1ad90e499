// SPDX-License-Identifier: BSD-3-Clause OR GPL-2.0-only
// XDP program of net_af_xdp, compiled at build time with clang's BPF target: drops in the
// driver, before any socket buffer exists (the early-drop path), or redirects to our AF_XDP
// socket on the packet's RX queue. The mode and UDP port come from ws_config; per-CPU counters
// in ws_counters are read back into the port's xstats.
//
// Offloaded flow rules (ws_rules, ws_config[2] of them, in matching order): each packet's
// headers are read into the FlowKey layout the software classifier uses (ws/flow/fields.hpp:
// the same bytes at the same offsets, the same layer bits), so a rule is the classifier's
// masked compare of eight 64-bit words; the first rule that matches decides. Per-rule per-CPU
// hit and byte counters are in ws_rule_counts.
//
// A queue rule sends the frame to port queue N: the kernel delivers a redirected frame only to
// a socket bound to the interface queue it arrived on, so ws_queue_xsks holds, for each
// interface queue i the port listens on and each port queue N, a socket bound to queue i that
// port queue N reads (key i * queues + N; the diagonal is the queue's own socket).
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

enum { mode_drop_all = 0, mode_drop_udp_dport = 1, mode_redirect_all = 2 };
enum { max_moving_queues = 16 };
// [cnt_moved + N]: frames a queue rule moved to port queue N from another interface queue.
enum { cnt_dropped = 0, cnt_redirected = 1, cnt_passed = 2, cnt_moved = 4, cnt_slots = 4 + max_moving_queues };

struct {
  __uint(type, BPF_MAP_TYPE_XSKMAP);
  __uint(max_entries, 64);
  __type(key, __u32);
  __type(value, __u32);
} xsks_map SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  // [0] mode, [1] UDP destination port (host order), [2] rules in ws_rules, [3] the port's first
  // interface queue, [4] its queues when ws_queue_xsks is filled (else 0)
  __uint(max_entries, 5);
  __type(key, __u32);
  __type(value, __u32);
} ws_config SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_XSKMAP);
  __uint(max_entries, max_moving_queues * max_moving_queues);
  __type(key, __u32);
  __type(value, __u32);
} ws_queue_xsks SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, cnt_slots);
  __type(key, __u32);
  __type(value, __u64);
} ws_counters SEC(".maps");

enum { max_rules = 64, rule_drop = 0, rule_queue = 1 };
// Layer bits and field offsets of ws/flow/fields.hpp.
enum { l_eth = 1, l_vlan = 2, l_ipv4 = 4, l_ipv6 = 8, l_udp = 16, l_tcp = 32, l_icmp = 64 };
enum { o_vlan = 14, o_tos = 18, o_ttl = 19, o_proto = 20, o_l3 = 22, o_l4 = 54, o_tcp_flags = 58, o_icmp = 60 };

struct ws_rule {  // the driver's XdpRule (af_xdp_port.cpp)
  __u64 mask[8];
  __u64 value[8];
  __u32 layers;
  __u32 action;  // rule_drop or rule_queue
  __u32 queue;   // rule_queue: the port RX queue
  __u32 pad;
};

struct ws_rule_count {
  __u64 packets;
  __u64 bytes;
};

struct ws_key {
  __u64 w[8];
  __u32 layers;
};

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, max_rules);
  __type(key, __u32);
  __type(value, struct ws_rule);
} ws_rules SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, max_rules);
  __type(key, __u32);
  __type(value, struct ws_rule_count);
} ws_rule_counts SEC(".maps");

static __always_inline int count(__u32 slot, int verdict) {
  __u64* c = bpf_map_lookup_elem(&ws_counters, &slot);
  if (c) *c += 1;
  return verdict;
}

static __always_inline int is_udp_dport(struct xdp_md* ctx, __u32 port) {
  void* data = (void*)(long)ctx->data;
  void* end = (void*)(long)ctx->data_end;
  struct ethhdr* eth = data;
  if ((void*)(eth + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP)) return 0;
  struct iphdr* ip = (void*)(eth + 1);
  if ((void*)(ip + 1) > end || ip->protocol != IPPROTO_UDP || ip->ihl < 5) return 0;
  struct udphdr* udp = (void*)ip + ip->ihl * 4;
  if ((void*)(udp + 1) > end) return 0;
  return udp->dest == bpf_htons((__u16)port);
}

static __always_inline void l4_key(__u8 proto, __u8* l4, void* end, struct ws_key* key) {
  __u8* k = (__u8*)key->w;
  if ((proto == IPPROTO_TCP && (void*)(l4 + 20) <= end) || (proto == IPPROTO_UDP && (void*)(l4 + 8) <= end)) {
    __builtin_memcpy(k + o_l4, l4, 4);
    if (proto == IPPROTO_TCP) k[o_tcp_flags] = l4[13];
    key->layers |= proto == IPPROTO_TCP ? l_tcp : l_udp;
  } else if (proto == IPPROTO_ICMP && (key->layers & l_ipv4) && (void*)(l4 + 4) <= end) {
    k[o_icmp] = l4[0];
    k[o_icmp + 1] = l4[1];
    key->layers |= l_icmp;
  }
}

static __always_inline void ipv4_key(__u8* p, void* end, struct ws_key* key) {
  __u8* k = (__u8*)key->w;
  if ((void*)(p + 20) > end || (p[0] >> 4) != 4) return;
  __u32 ihl = (p[0] & 15u) * 4u;
  if (ihl < 20 || (void*)(p + ihl) > end) return;
  k[o_tos] = p[1];
  k[o_ttl] = p[8];
  k[o_proto] = p[9];
  __builtin_memcpy(k + o_l3, p + 12, 8);
  key->layers |= l_ipv4;
  if ((((struct iphdr*)p)->frag_off & bpf_htons(0x1fff)) == 0) l4_key(p[9], p + ihl, end, key);
}

// The packet's FlowKey, as flow_key_of() reads an mbuf.
static __always_inline void flow_key(struct xdp_md* ctx, struct ws_key* key) {
  __u8* p = (void*)(long)ctx->data;
  void* end = (void*)(long)ctx->data_end;
  __u8* k = (__u8*)key->w;
  if ((void*)(p + 14) > end) return;
  __builtin_memcpy(k, p, 14);
  key->layers = l_eth;
  __u16 type = ((struct ethhdr*)p)->h_proto;
  p += 14;
  if ((type == bpf_htons(ETH_P_8021Q) || type == bpf_htons(ETH_P_8021AD)) && (void*)(p + 4) <= end) {
    __builtin_memcpy(k + o_vlan, p, 4);
    key->layers |= l_vlan;
    type = *(__u16*)(p + 2);
    p += 4;
  }
  if (type == bpf_htons(ETH_P_IP)) {
    ipv4_key(p, end, key);
  } else if (type == bpf_htons(ETH_P_IPV6) && (void*)(p + 40) <= end) {
    k[o_tos] = (__u8)(bpf_ntohs(*(__u16*)p) >> 4);
    k[o_ttl] = p[7];
    k[o_proto] = p[6];
    __builtin_memcpy(k + o_l3, p + 8, 32);
    key->layers |= l_ipv6;
    l4_key(p[6], p + 40, end, key);
  }
}

// The first of the n rules that matches (counted): rule_drop, rule_queue + 1 + N for queue N,
// or -1 when none does.
static __always_inline int match_rules(struct xdp_md* ctx, __u32 n) {
  struct ws_key key = {};
  flow_key(ctx, &key);
  for (__u32 i = 0; i < max_rules; i++) {
    if (i >= n) break;
    __u32 slot = i;
    struct ws_rule* r = bpf_map_lookup_elem(&ws_rules, &slot);
    if (!r) break;
    if ((key.layers & r->layers) != r->layers) continue;
    __u64 diff = 0;
#pragma unroll
    for (int w = 0; w < 8; w++) diff |= (key.w[w] & r->mask[w]) ^ r->value[w];
    if (diff) continue;
    struct ws_rule_count* c = bpf_map_lookup_elem(&ws_rule_counts, &slot);
    if (c) {
      c->packets += 1;
      c->bytes += ctx->data_end - ctx->data;
    }
    return r->action == rule_queue ? (int)(rule_queue + 1 + (r->queue & 0xffff)) : (int)r->action;
  }
  return -1;
}

// Redirects to the socket on the arrival queue that port queue `queue` reads; -1 when there is
// none (the frame arrived on a queue the port does not listen on, or no such socket).
static __always_inline int to_queue(struct xdp_md* ctx, __u32 queue) {
  __u32 k3 = 3, k4 = 4;
  __u32* start = bpf_map_lookup_elem(&ws_config, &k3);
  __u32* queues = bpf_map_lookup_elem(&ws_config, &k4);
  if (!start || !queues) return -1;
  __u32 n = *queues;
  __u32 arrived = ctx->rx_queue_index - *start;  // wraps below the first queue
  if (n > max_moving_queues || arrived >= n || queue >= n) return -1;
  if (bpf_redirect_map(&ws_queue_xsks, arrived * n + queue, XDP_ABORTED) != XDP_REDIRECT) return -1;
  if (queue != arrived) count(cnt_moved + queue, 0);
  return count(cnt_redirected, XDP_REDIRECT);
}

SEC("xdp")
int ws_xdp(struct xdp_md* ctx) {
  __u32 k0 = 0, k1 = 1;
  __u32* mode = bpf_map_lookup_elem(&ws_config, &k0);
  __u32* port = bpf_map_lookup_elem(&ws_config, &k1);
  if (!mode || !port) return XDP_PASS;
  if (*mode == mode_drop_all) return count(cnt_dropped, XDP_DROP);
  __u32 k2 = 2;
  __u32* rules = bpf_map_lookup_elem(&ws_config, &k2);
  int act = rules && *rules ? match_rules(ctx, *rules) : -1;
  if (act == rule_drop) return count(cnt_dropped, XDP_DROP);
  if (act > rule_queue) {
    int v = to_queue(ctx, (__u32)(act - rule_queue - 1));
    if (v >= 0) return v;
  }
  if (*mode == mode_drop_udp_dport && is_udp_dport(ctx, *port)) return count(cnt_dropped, XDP_DROP);
  int v = bpf_redirect_map(&xsks_map, ctx->rx_queue_index, XDP_PASS);
  return count(v == XDP_REDIRECT ? cnt_redirected : cnt_passed, v);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
