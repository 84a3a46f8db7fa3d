// rxv_shim.c: an LD_PRELOAD shim over libibverbs that injects ONE fault into the work
// requests rxe-verify posts on a real rxe device (tests/vm/shim/README.md).
//
// It wraps ibv_open_device and, on the context it returns, replaces the provider's
// ops.post_send and ops.poll_cq (struct ibv_context_ops: the pointers the inline
// ibv_post_send and ibv_poll_cq of <infiniband/verbs.h> call) with the wrappers below.
// It is built against the same verbs.h as rxe-verify, so both see one layout.
//
//   RXV_SHIM_FAULT  none | truncate | shift | nodata | corrupt | overrun | drop | delay
//   RXV_SHIM_OP     write | read: which work requests are counted (default write)
//   RXV_SHIM_AT     the index, from 0, of the counted work request hit (default 2)
//   RXV_SHIM_DELAY_MS  delay: how long completions are held (default 4000)
//
// One line on stderr says when the fault was injected ("rxv-shim: injected ...").
#define _GNU_SOURCE
#include <dlfcn.h>
#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum fault { F_NONE, F_TRUNCATE, F_SHIFT, F_NODATA, F_CORRUPT, F_OVERRUN, F_DROP, F_DELAY };
static const char *const fault_names[] = {"none",    "truncate", "shift", "nodata",
                                          "corrupt", "overrun",  "drop",  "delay"};

enum { MAX_SGE = 64, HOLD_CAP = 4096, SHIFT_BYTES = 8, OVERRUN_BYTES = 16 };

static struct {
  enum fault fault;
  enum ibv_wr_opcode op;
  unsigned long at;
  long delay_ms;
  pthread_mutex_t lock;
  unsigned long seen;  // work requests of op posted so far
  int injected;
  // corrupt (read) and delay: the completion that sets them off
  int armed;
  uint32_t qp_num;
  uint64_t wr_id;
  uint8_t *flip_at;
  // drop: every later post on this QP is swallowed
  int dropping;
  uint32_t drop_qp;
  // delay: completions of hold_cq held until release (monotonic ns)
  struct ibv_cq *hold_cq;
  int holding;
  uint64_t release_ns;
  struct ibv_wc held[HOLD_CAP];
  int held_n, held_pos;
  int (*post_send)(struct ibv_qp *, struct ibv_send_wr *, struct ibv_send_wr **);
  int (*poll_cq)(struct ibv_cq *, int, struct ibv_wc *);
} s = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void die(const char *what, const char *value, const char *expect) {
  fprintf(stderr, "rxv-shim: error: %s=%s: %s\n", what, value, expect);
  exit(2);
}

static uint64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

__attribute__((constructor)) static void shim_init(void) {
  const char *f = getenv("RXV_SHIM_FAULT");
  const char *op = getenv("RXV_SHIM_OP");
  const char *at = getenv("RXV_SHIM_AT");
  const char *delay = getenv("RXV_SHIM_DELAY_MS");
  char *end = NULL;
  s.fault = F_NONE;
  if (f && *f) {
    size_t i, n = sizeof fault_names / sizeof fault_names[0];
    for (i = 0; i < n && strcmp(f, fault_names[i]) != 0; ++i)
      ;
    if (i == n)
      die("RXV_SHIM_FAULT", f, "use none, truncate, shift, nodata, corrupt, overrun, drop or delay");
    s.fault = (enum fault)i;
  }
  s.op = IBV_WR_RDMA_WRITE;
  if (op && strcmp(op, "read") == 0) s.op = IBV_WR_RDMA_READ;
  else if (op && *op && strcmp(op, "write") != 0) die("RXV_SHIM_OP", op, "use write or read");
  s.at = 2;
  if (at && *at) {
    s.at = strtoul(at, &end, 10);
    if (*end) die("RXV_SHIM_AT", at, "use a work request index, 0 or more");
  }
  s.delay_ms = 4000;
  if (delay && *delay) {
    s.delay_ms = strtol(delay, &end, 10);
    if (*end || s.delay_ms < 0) die("RXV_SHIM_DELAY_MS", delay, "use milliseconds, 0 or more");
  }
}

static uint32_t sge_total(const struct ibv_send_wr *w) {
  uint32_t t = 0;
  for (int i = 0; i < w->num_sge; ++i) t += w->sg_list[i].length;
  return t;
}

// Changes the copy *w (its scatter list copied into sge) as the fault says; returns 1
// when the work request must not be posted (drop).
static int inject(struct ibv_qp *qp, struct ibv_send_wr *w, struct ibv_sge *sge) {
  uint32_t len = sge_total(w);
  int skip = 0;
  memcpy(sge, w->sg_list, sizeof *sge * (size_t)w->num_sge);
  w->sg_list = sge;
  switch (s.fault) {
    case F_TRUNCATE: {  // the last half of the bytes is not sent
      uint32_t cut = len - len / 2;
      for (int i = w->num_sge - 1; i >= 0 && cut; --i) {
        uint32_t c = cut < sge[i].length ? cut : sge[i].length;
        sge[i].length -= c;
        cut -= c;
      }
      break;
    }
    case F_SHIFT:  // the remote side's range starts SHIFT_BYTES late
      w->wr.rdma.remote_addr += SHIFT_BYTES;
      break;
    case F_NODATA:  // a zero-length RDMA WRITE in its place: completes, moves no byte
      w->opcode = IBV_WR_RDMA_WRITE;
      w->num_sge = 0;
      w->sg_list = NULL;
      break;
    case F_CORRUPT:
      if (w->opcode == IBV_WR_RDMA_WRITE) {  // the source byte, before it is sent
        ((uint8_t *)(uintptr_t)sge[0].addr)[sge[0].length / 2] ^= 0xFF;
      } else {  // the destination byte, once the READ's completion is polled
        s.armed = 1;
        s.qp_num = qp->qp_num;
        s.wr_id = w->wr_id;
        s.flip_at = (uint8_t *)(uintptr_t)sge[0].addr + sge[0].length / 2;
      }
      break;
    case F_OVERRUN:  // OVERRUN_BYTES more, past the end on both sides
      sge[w->num_sge - 1].length += OVERRUN_BYTES;
      break;
    case F_DROP:  // neither this nor any later post on the QP reaches rxe
      s.dropping = 1;
      s.drop_qp = qp->qp_num;
      skip = 1;
      break;
    case F_DELAY:
      s.armed = 1;
      s.qp_num = qp->qp_num;
      s.wr_id = w->wr_id;
      break;
    case F_NONE:
      break;
  }
  fprintf(stderr,
          "rxv-shim: injected %s into %s work request #%lu (wr_id %llu, %u bytes, remote "
          "0x%llx)\n",
          fault_names[s.fault], s.op == IBV_WR_RDMA_READ ? "READ" : "WRITE", s.at,
          (unsigned long long)w->wr_id, len, (unsigned long long)w->wr.rdma.remote_addr);
  return skip;
}

static int shim_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad) {
  for (struct ibv_send_wr *cur = wr; cur; cur = cur->next) {
    struct ibv_send_wr w = *cur, *b = NULL;
    struct ibv_sge sge[MAX_SGE];
    int skip = 0, e;
    w.next = NULL;
    pthread_mutex_lock(&s.lock);
    if (s.dropping && qp->qp_num == s.drop_qp) {
      skip = 1;
    } else if (cur->opcode == s.op && !s.injected && s.fault != F_NONE && cur->num_sge <= MAX_SGE &&
               s.seen++ == s.at) {
      s.injected = 1;
      skip = inject(qp, &w, sge);
    }
    pthread_mutex_unlock(&s.lock);
    if (skip) continue;
    e = s.post_send(qp, &w, &b);
    if (e) {
      *bad = cur;
      return e;
    }
  }
  return 0;
}

// The completion that implies the armed work request's (RC completes in order).
static int sets_off(const struct ibv_wc *wc) {
  return s.armed && wc->qp_num == s.qp_num && wc->wr_id >= s.wr_id;
}

static int shim_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc) {
  int got;
  pthread_mutex_lock(&s.lock);
  if (s.holding && cq == s.hold_cq) {
    // hold: keep reaping into the store so the CQ does not overflow
    while (s.held_n < HOLD_CAP) {
      got = s.poll_cq(cq, HOLD_CAP - s.held_n, s.held + s.held_n);
      if (got <= 0) break;
      s.held_n += got;
    }
    if (now_ns() < s.release_ns) {
      pthread_mutex_unlock(&s.lock);
      return 0;
    }
    got = s.held_n - s.held_pos < n ? s.held_n - s.held_pos : n;
    memcpy(wc, s.held + s.held_pos, sizeof *wc * (size_t)got);
    s.held_pos += got;
    if (s.held_pos == s.held_n) s.holding = 0;
    pthread_mutex_unlock(&s.lock);
    return got;
  }
  got = s.poll_cq(cq, n, wc);
  for (int i = 0; i < got; ++i) {
    if (!sets_off(&wc[i])) continue;
    s.armed = 0;
    if (s.fault == F_CORRUPT && wc[i].status == IBV_WC_SUCCESS) {
      *s.flip_at ^= 0xFF;
    } else if (s.fault == F_DELAY) {
      s.holding = 1;
      s.hold_cq = cq;
      s.release_ns = now_ns() + (uint64_t)s.delay_ms * 1000000u;
      s.held_n = got - i;
      s.held_pos = 0;
      memcpy(s.held, wc + i, sizeof *wc * (size_t)s.held_n);
      fprintf(stderr, "rxv-shim: holding completions from wr_id %llu for %ld ms\n",
              (unsigned long long)wc[i].wr_id, s.delay_ms);
      got = i;
    }
    break;
  }
  pthread_mutex_unlock(&s.lock);
  return got;
}

struct ibv_context *ibv_open_device(struct ibv_device *dev) {
  static struct ibv_context *(*real)(struct ibv_device *);
  struct ibv_context *ctx;
  if (!real)  // POSIX's way to take a function pointer from dlsym
    *(void **)&real = dlsym(RTLD_NEXT, "ibv_open_device");
  if (!real) {
    fprintf(stderr, "rxv-shim: error: no ibv_open_device after the shim: %s\n", dlerror());
    exit(2);
  }
  ctx = real(dev);
  if (!ctx) return NULL;
  pthread_mutex_lock(&s.lock);
  if (ctx->ops.post_send != shim_post_send) {
    s.post_send = ctx->ops.post_send;
    s.poll_cq = ctx->ops.poll_cq;
    ctx->ops.post_send = shim_post_send;
    ctx->ops.poll_cq = shim_poll_cq;
    fprintf(stderr, "rxv-shim: post_send and poll_cq of %s wrapped, fault %s\n", dev->name,
            fault_names[s.fault]);
  }
  pthread_mutex_unlock(&s.lock);
  return ctx;
}
