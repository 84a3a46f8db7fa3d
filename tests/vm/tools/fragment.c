// SPDX-License-Identifier: GPL-2.0
/*
 * fragment: fragment physical memory on purpose, the way FIELD-NOTES.md records it
 * ("The bug, reproduced"), then hold it until told to stop.
 *
 *   fragment [--leave MIB] [--hold SECONDS]
 *
 * 1. transparent huge pages "always", vm.compact_unevictable_allowed=0 (old values
 *    restored on exit);
 * 2. fill all of MemAvailable but --leave MiB (default 120) with MADV_HUGEPAGE memory,
 *    so huge pages use up the order-9/10 blocks;
 * 3. read each page's frame from /proc/self/pagemap, mlock one 4 KiB page in every
 *    physical 2 MiB block the process owns and MADV_DONTNEED the rest: the freed memory
 *    can then never merge above order 8 (and compaction may not move mlocked pages);
 * 4. print /proc/buddyinfo before and after, "fragment: ready" and wait for SIGTERM,
 *    SIGINT or SIGUSR1 (or --hold seconds, default 3600);
 * 5. release everything, restore the settings, print /proc/buddyinfo again.
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

static const char thp_path[] = "/sys/kernel/mm/transparent_hugepage/enabled";
static const char cua_path[] = "/proc/sys/vm/compact_unevictable_allowed";
static char thp_old[32], cua_old[32];

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
	if (thp_old[0])
		write_small(thp_path, thp_old);
	if (cua_old[0])
		write_small(cua_path, cua_old);
}

static int usage(FILE *f)
{
	fprintf(f, "usage: fragment [--leave MIB] [--hold SECONDS]\n");
	return f == stderr ? 2 : 0;
}

int main(int argc, char **argv)
{
	unsigned long leave_mib = 120, hold = 3600, avail, len, npages, i, kept = 0, run = 0;
	unsigned long blocks_max, nblocks = 0;
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
	sigprocmask(SIG_BLOCK, &set, NULL);

	print_buddyinfo("before");
	if (read_small(thp_path, buf, sizeof(buf)) == 0)
		thp_selected(buf, thp_old, sizeof(thp_old));
	if (read_small(cua_path, cua_old, sizeof(cua_old)) != 0)
		cua_old[0] = '\0';
	if (write_small(thp_path, "always") || write_small(cua_path, "0")) {
		fprintf(stderr, "fragment: error: cannot set THP always / compact_unevictable_allowed=0: %s\n",
			strerror(errno));
		restore();
		return 1;
	}

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
	print_buddyinfo("fragmented");
	printf("fragment: ready (pid %d); SIGTERM, SIGINT or SIGUSR1 releases\n", (int)getpid());
	fflush(stdout);

	ts.tv_sec = (time_t)hold;
	ts.tv_nsec = 0;
	sig = sigtimedwait(&set, NULL, &ts);
	printf("fragment: %s, releasing\n", sig > 0 ? strsignal(sig) : "hold time over");
	munmap(mem, len);
	restore();
	print_buddyinfo("released");
	return 0;
}
