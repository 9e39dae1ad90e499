// SPDX-License-Identifier: BSD-3-Clause OR GPL-2.0-only
// XDP program of net_af_xdp, compiled at build time with clang's BPF target: drops in the
// driver, before any socket buffer exists (the early-drop path), or redirects to our AF_XDP
// socket on the packet's RX queue. The mode and UDP port come from ws_config; per-CPU counters
// in ws_counters are read back into the port's xstats.
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

enum { mode_drop_all = 0, mode_drop_udp_dport = 1, mode_redirect_all = 2 };
enum { cnt_dropped = 0, cnt_redirected = 1, cnt_passed = 2, cnt_slots = 4 };

struct {
  __uint(type, BPF_MAP_TYPE_XSKMAP);
  __uint(max_entries, 64);
  __type(key, __u32);
  __type(value, __u32);
} xsks_map SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 2);  // [0] mode, [1] UDP destination port (host order)
  __type(key, __u32);
  __type(value, __u32);
} ws_config SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, cnt_slots);
  __type(key, __u32);
  __type(value, __u64);
} ws_counters SEC(".maps");

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

SEC("xdp")
int ws_xdp(struct xdp_md* ctx) {
  __u32 k0 = 0, k1 = 1;
  __u32* mode = bpf_map_lookup_elem(&ws_config, &k0);
  __u32* port = bpf_map_lookup_elem(&ws_config, &k1);
  if (!mode || !port) return XDP_PASS;
  if (*mode == mode_drop_all) return count(cnt_dropped, XDP_DROP);
  if (*mode == mode_drop_udp_dport && is_udp_dport(ctx, *port)) return count(cnt_dropped, XDP_DROP);
  int v = bpf_redirect_map(&xsks_map, ctx->rx_queue_index, XDP_PASS);
  return count(v == XDP_REDIRECT ? cnt_redirected : cnt_passed, v);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
