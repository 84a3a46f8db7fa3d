// SPDX-License-Identifier: GPL-2.0
/*
 * fragment: fragment physical memory on purpose (huge pages filled, then one mlocked
 * 4 KiB page kept in every 2 MiB block, so no order-9 or larger block can form again),
 * then hold it until told to stop.
 *
 *   fragment [--leave MIB] [--hold SECONDS]
 *
 * 1. settings that keep the fragmented state from being undone (old values restored on
 *    exit; tests/vm/README.md says why each one):
 *      vm.compact_unevictable_allowed  0     compaction may not move mlocked pages
 *      vm.compaction_proactiveness     0     no background (proactive) compaction
 *      vm.extfrag_threshold            1000  no compaction for orders above 3, direct
 *                                            or by kcompactd: a failed high-order
 *                                            allocation cannot rebuild its block
 *      vm.watermark_boost_factor       0     a fragmenting fallback does not boost the
 *                                            watermarks (kswapd reclaim, kcompactd)
 *      vm.percpu_pagelist_high_fraction  2^30  per-CPU free lists at their minimum, so
 *                                            a freed 2 MiB block goes back to the buddy
 *                                            lists (where buddyinfo and a top-up see it)
 *                                            instead of waiting on a per-CPU list for
 *                                            the drain that a failing allocation does
 *    transparent_hugepage/enabled is set to madvise, not always: the fill asks for huge
 *    pages itself, and other processes (the verifier's regions) then get 4 KiB pages,
 *    whose freeing cannot hand a whole 2 MiB block back;
 *    and the page cache is dropped, so the fill below takes that memory too;
 * 2. fill all of MemAvailable but --leave MiB (default 120) with MADV_HUGEPAGE memory,
 *    so huge pages use up the order-9/10 blocks;
 * 3. read each page's frame from /proc/self/pagemap, mlock one 4 KiB page in every
 *    physical 2 MiB block the process owns and MADV_DONTNEED the rest: the freed memory
 *    can then never merge above order 8 (and compaction may not move mlocked pages);
 * 4. top up: drop the page cache, then take every 2 MiB block that can still be had as
 *    a transparent huge page (free ones outside the fill, e.g. in the --leave memory,
 *    and what the allocator's own reclaim and per-CPU drain free up), keep one mlocked
 *    4 KiB page of each and free the rest, until a huge-page fault gets a 4 KiB page;
 *    it reports the free blocks of order >= 9 that /proc/buddyinfo then shows in the
 *    zones a kernel allocation uses (all but DMA);
 * 5. print /proc/buddyinfo before and after, "fragment: ready" and wait: SIGUSR2 tops
 *    up again (step 4; prints "fragment: topup N done: ..."), SIGTERM, SIGINT or
 *    SIGUSR1 (or --hold seconds, default 3600) releases;
 * 6. release everything, restore the settings, print /proc/buddyinfo again.
 *
 * Needs root (pagemap frame numbers, mlock, sysctls). Exit 0, 1 on failure, 2 on bad
 * arguments.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define PAGE_SZ		4096UL
#define BLOCK_SZ	(2UL << 20)
#define PFN_MASK	((1ULL << 55) - 1)
#define PM_PRESENT	(1ULL << 63)

#define TOPUP_ORDER	9		/* a 2 MiB block: what one huge page takes */
#define TOPUP_MAX	16384		/* blocks taken by top-ups in all, at most (32 GiB) */

static const char thp_path[] = "/sys/kernel/mm/transparent_hugepage/enabled";
static char thp_old[32];

/* sysctls set while fragmenting; "required" ones make a failure to set them fatal */
static struct setting {
	const char *path, *value;
	int required;
	char old[32];
} settings[] = {
	{ "/proc/sys/vm/compact_unevictable_allowed", "0", 1, "" },
	{ "/proc/sys/vm/compaction_proactiveness", "0", 0, "" },
	{ "/proc/sys/vm/extfrag_threshold", "1000", 1, "" },
	{ "/proc/sys/vm/watermark_boost_factor", "0", 0, "" },
	{ "/proc/sys/vm/percpu_pagelist_high_fraction", "1073741824", 0, "" },
};
#define N_SETTINGS (sizeof(settings) / sizeof(settings[0]))

/* blocks taken by top-ups: the 2 MiB mappings, each with one mlocked page */
static unsigned char *topup_map[TOPUP_MAX];
static unsigned long topup_n;

static int read_small(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n < 0)
		return -1;
	buf[n] = '\0';
	return 0;
}

static int write_small(const char *path, const char *val)
{
	int fd = open(path, O_WRONLY);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = write(fd, val, strlen(val));
	close(fd);
	return n < 0 ? -1 : 0;
}

/* "always [madvise] never" -> "madvise" */
static void thp_selected(const char *in, char *out, size_t len)
{
	const char *a = strchr(in, '['), *b = a ? strchr(a, ']') : NULL;

	if (!a || !b || (size_t)(b - a - 1) >= len) {
		snprintf(out, len, "madvise");
		return;
	}
	memcpy(out, a + 1, b - a - 1);
	out[b - a - 1] = '\0';
}

static void print_buddyinfo(const char *when)
{
	char buf[4096];

	if (read_small("/proc/buddyinfo", buf, sizeof(buf)) == 0)
		printf("fragment: buddyinfo %s:\n%s", when, buf);
	fflush(stdout);
}

static unsigned long meminfo_kib(const char *key)
{
	char line[256];
	unsigned long v = 0;
	size_t kl = strlen(key);
	FILE *f = fopen("/proc/meminfo", "r");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, key, kl) && line[kl] == ':') {
			v = strtoul(line + kl + 1, NULL, 10);
			break;
		}
	fclose(f);
	return v;
}

static void restore(void)
{
	size_t k;

	if (thp_old[0])
		write_small(thp_path, thp_old);
	for (k = 0; k < N_SETTINGS; k++)
		if (settings[k].old[0])
			write_small(settings[k].path, settings[k].old);
}

static int apply_settings(void)
{
	size_t k;

	for (k = 0; k < N_SETTINGS; k++) {
		struct setting *st = &settings[k];

		if (read_small(st->path, st->old, sizeof(st->old)) != 0) {
			st->old[0] = '\0';
			if (st->required) {
				fprintf(stderr, "fragment: error: cannot read %s: %s\n", st->path, strerror(errno));
				return -1;
			}
			printf("fragment: %s absent on this kernel, not set\n", st->path);
			continue;
		}
		if (write_small(st->path, st->value) != 0) {
			fprintf(stderr, "fragment: error: cannot set %s to %s: %s\n", st->path, st->value,
				strerror(errno));
			return -1;
		}
	}
	return 0;
}

/*
 * Free blocks of order >= `order` in the zones a GFP_KERNEL allocation may use (every
 * zone but DMA), from /proc/buddyinfo; -1 when it cannot be read.
 */
static long free_blocks_at_least(int order)
{
	char buf[4096], *line, *save = NULL;
	long n = 0;

	if (read_small("/proc/buddyinfo", buf, sizeof(buf)) != 0)
		return -1;
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char zone[32], *p;
		int node, used, k;

		if (sscanf(line, "Node %d, zone %31s%n", &node, zone, &used) != 2 || !strcmp(zone, "DMA"))
			continue;
		p = line + used;
		for (k = 0; *p; k++) {
			char *end;
			long v = strtol(p, &end, 10);

			if (end == p)
				break;
			if (k >= order)
				n += v;
			p = end;
		}
	}
	return n;
}

/*
 * Take one free 2 MiB block as a transparent huge page; keep (mlock) its first 4 KiB
 * page and free the rest, so the block can no longer merge. 1 taken, 0 no huge page to
 * be had (the fault got a 4 KiB page), -1 error.
 */
static int take_block(void)
{
	unsigned char *raw, *m;
	uint64_t pm[2];
	int fd, huge;

	raw = mmap(NULL, 2 * BLOCK_SZ, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
		   -1, 0);
	if (raw == MAP_FAILED)
		return -1;
	m = (unsigned char *)(((uintptr_t)raw + BLOCK_SZ - 1) & ~(BLOCK_SZ - 1));
	if (m > raw)
		munmap(raw, (size_t)(m - raw));
	munmap(m + BLOCK_SZ, (size_t)(raw + 2 * BLOCK_SZ - (m + BLOCK_SZ)));
	madvise(m, BLOCK_SZ, MADV_HUGEPAGE);
	m[0] = 1;
	fd = open("/proc/self/pagemap", O_RDONLY);
	huge = fd >= 0 &&
	       pread(fd, &pm[0], sizeof(pm[0]), (off_t)((uintptr_t)m / PAGE_SZ * sizeof(uint64_t))) == sizeof(pm[0]) &&
	       pread(fd, &pm[1], sizeof(pm[1]), (off_t)(((uintptr_t)m + BLOCK_SZ - PAGE_SZ) / PAGE_SZ * sizeof(uint64_t))) ==
		       sizeof(pm[1]) &&
	       (pm[0] & PM_PRESENT) && (pm[1] & PM_PRESENT) && (pm[0] & PFN_MASK) % 512 == 0 &&
	       (pm[1] & PFN_MASK) == (pm[0] & PFN_MASK) + 511;
	if (fd >= 0)
		close(fd);
	if (!huge) {
		munmap(m, BLOCK_SZ);
		return 0;
	}
	if (mlock(m, PAGE_SZ) != 0) {
		munmap(m, BLOCK_SZ);
		return -1;
	}
	madvise(m + PAGE_SZ, BLOCK_SZ - PAGE_SZ, MADV_DONTNEED);
	topup_map[topup_n++] = m;
	return 1;
}

/* step 4: returns the blocks taken; *left = free blocks of order >= 9 afterwards */
static unsigned long topup(long *left)
{
	unsigned long taken = 0;
	int r;

	write_small("/proc/sys/vm/drop_caches", "3");
	while (topup_n < TOPUP_MAX) {
		r = take_block();
		if (r <= 0)
			break;
		taken++;
	}
	*left = free_blocks_at_least(TOPUP_ORDER);
	return taken;
}

static int usage(FILE *f)
{
	fprintf(f, "usage: fragment [--leave MIB] [--hold SECONDS]\n");
	return f == stderr ? 2 : 0;
}

int main(int argc, char **argv)
{
	unsigned long leave_mib = 120, hold = 3600, avail, len, npages, i, kept = 0, run = 0;
	unsigned long blocks_max, nblocks = 0, taken, topups = 0;
	long left;
	uint64_t *pm, *seen;
	unsigned char *mem;
	char buf[64];
	sigset_t set;
	struct timespec ts;
	int fd, sig;

	for (i = 1; i < (unsigned long)argc; i++) {
		if (!strcmp(argv[i], "--leave") && i + 1 < (unsigned long)argc) {
			leave_mib = strtoul(argv[++i], NULL, 10);
		} else if (!strcmp(argv[i], "--hold") && i + 1 < (unsigned long)argc) {
			hold = strtoul(argv[++i], NULL, 10);
		} else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			return usage(stdout);
		} else {
			fprintf(stderr, "fragment: error: unknown argument '%s'\n", argv[i]);
			return usage(stderr);
		}
	}
	if (geteuid() != 0) {
		fprintf(stderr, "fragment: error: needs root (pagemap frame numbers, mlock, sysctls)\n");
		return 1;
	}
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGUSR1);
	sigaddset(&set, SIGUSR2);
	sigprocmask(SIG_BLOCK, &set, NULL);

	print_buddyinfo("before");
	if (read_small(thp_path, buf, sizeof(buf)) == 0)
		thp_selected(buf, thp_old, sizeof(thp_old));
	if (write_small(thp_path, "madvise")) {
		fprintf(stderr, "fragment: error: cannot set %s to madvise: %s\n", thp_path, strerror(errno));
		restore();
		return 1;
	}
	if (apply_settings()) {
		restore();
		return 1;
	}
	printf("fragment: set THP madvise, vm.compact_unevictable_allowed=0, vm.compaction_proactiveness=0, vm.extfrag_threshold=1000, vm.watermark_boost_factor=0, vm.percpu_pagelist_high_fraction=1073741824\n");
	write_small("/proc/sys/vm/drop_caches", "3");

	avail = meminfo_kib("MemAvailable") * 1024;
	if (avail <= (leave_mib << 20) + BLOCK_SZ) {
		fprintf(stderr, "fragment: error: MemAvailable %lu MiB is not above --leave %lu MiB\n",
			avail >> 20, leave_mib);
		restore();
		return 1;
	}
	len = (avail - (leave_mib << 20)) & ~(BLOCK_SZ - 1);
	/* over-allocate one block so the fill can start on a 2 MiB boundary */
	mem = mmap(NULL, len + BLOCK_SZ, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
		   -1, 0);
	if (mem == MAP_FAILED) {
		fprintf(stderr, "fragment: error: mmap %lu MiB: %s\n", len >> 20, strerror(errno));
		restore();
		return 1;
	}
	mem = (unsigned char *)(((uintptr_t)mem + BLOCK_SZ - 1) & ~(BLOCK_SZ - 1));
	madvise(mem, len, MADV_HUGEPAGE);
	printf("fragment: filling %lu MiB of %lu MiB available with huge pages\n", len >> 20, avail >> 20);
	fflush(stdout);
	for (i = 0; i < len; i += PAGE_SZ)
		mem[i] = 1;

	npages = len / PAGE_SZ;
	pm = malloc(npages * sizeof(*pm));
	blocks_max = npages;
	seen = calloc(blocks_max, sizeof(*seen));
	fd = open("/proc/self/pagemap", O_RDONLY);
	if (!pm || !seen || fd < 0 ||
	    pread(fd, pm, npages * sizeof(*pm), (off_t)((uintptr_t)mem / PAGE_SZ * sizeof(*pm))) !=
		    (ssize_t)(npages * sizeof(*pm))) {
		fprintf(stderr, "fragment: error: reading /proc/self/pagemap: %s\n", strerror(errno));
		restore();
		return 1;
	}
	close(fd);

	/*
	 * One kept page per physical 2 MiB block: remember the blocks already kept in a
	 * small open-addressing table (pfn >> 9, stored + 1 so 0 means empty).
	 */
	for (i = 0; i < npages; i++) {
		uint64_t pfn = pm[i] & PFN_MASK, blk = (pfn >> 9) + 1, h;
		int keep = 0;

		if (!(pm[i] & PM_PRESENT) || !pfn) {
			run++;
			continue;
		}
		h = (blk * 0x9E3779B97F4A7C15ULL) % blocks_max;
		while (seen[h] && seen[h] != blk)
			h = (h + 1) % blocks_max;
		if (!seen[h]) {
			seen[h] = blk;
			keep = 1;
			nblocks++;
		}
		if (!keep) {
			run++;
			continue;
		}
		if (run)
			madvise(mem + (i - run) * PAGE_SZ, run * PAGE_SZ, MADV_DONTNEED);
		run = 0;
		if (mlock(mem + i * PAGE_SZ, PAGE_SZ) == 0)
			kept++;
	}
	if (run)
		madvise(mem + (npages - run) * PAGE_SZ, run * PAGE_SZ, MADV_DONTNEED);
	free(pm);
	free(seen);
	/* let the split huge pages go back to the buddy allocator */
	write_small("/proc/sys/vm/drop_caches", "3");
	printf("fragment: holding %lu mlocked 4 KiB pages in %lu physical 2 MiB blocks (%lu KiB)\n",
	       kept, nblocks, kept * PAGE_SZ / 1024);
	taken = topup(&left);
	printf("fragment: topup 0 done: took %lu more blocks, %ld free blocks of order >= %d left\n", taken, left,
	       TOPUP_ORDER);
	print_buddyinfo("fragmented");
	printf("fragment: ready (pid %d); SIGUSR2 tops up, SIGTERM, SIGINT or SIGUSR1 releases\n", (int)getpid());
	fflush(stdout);

	for (;;) {
		ts.tv_sec = (time_t)hold;
		ts.tv_nsec = 0;
		sig = sigtimedwait(&set, NULL, &ts);
		if (sig != SIGUSR2)
			break;
		taken = topup(&left);
		printf("fragment: topup %lu done: took %lu more blocks (%lu in all), %ld free blocks of order >= %d left\n",
		       ++topups, taken, topup_n, left, TOPUP_ORDER);
		fflush(stdout);
	}
	printf("fragment: %s, releasing\n", sig > 0 ? strsignal(sig) : "hold time over");
	munmap(mem, len);
	for (i = 0; i < topup_n; i++)
		munmap(topup_map[i], BLOCK_SZ);
	restore();
	print_buddyinfo("released");
	return 0;
}
