#include "master/modules.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>

#include "kinds/registry.h"

/* Files already opened by this master, to reuse on reload when their contents are unchanged.
 * Contents, not metadata: a file replaced in place with its old mtime and size (cp -p, rsync
 * -t, a build that restores timestamps) must be loaded again. */
struct loaded {
	off_t size;
	XXH64_hash_t hash;          /* XXH3_64bits of the whole file */
	void *handle;
	const struct lagless_module *desc;
	struct loaded *next;
};

static struct loaded *loaded;

#if UINTPTR_MAX == 0xffffffffffffffffu
typedef Elf64_Ehdr ehdr_t;
typedef Elf64_Phdr phdr_t;
#define LG_ELFCLASS ELFCLASS64
#else
typedef Elf32_Ehdr ehdr_t;
typedef Elf32_Phdr phdr_t;
#define LG_ELFCLASS ELFCLASS32
#endif

static int
table_in(uint64_t off, uint64_t num, uint64_t entsize, size_t len)
{
	return num == 0 || (off <= len && entsize != 0 && num <= (len - off) / entsize);
}

int
lg_modules_check_elf(const unsigned char *buf, size_t len, char *err, size_t cap)
{
	ehdr_t eh;

	if (len < sizeof(eh) || memcmp(buf, ELFMAG, SELFMAG) != 0) {
		snprintf(err, cap, "not an ELF file");
		return -1;
	}
	memcpy(&eh, buf, sizeof(eh));
	if (eh.e_ident[EI_CLASS] != LG_ELFCLASS || eh.e_type != ET_DYN) {
		snprintf(err, cap, "not a shared object of this machine's class");
		return -1;
	}
	if (!table_in(eh.e_phoff, eh.e_phnum, eh.e_phentsize, len) ||
	    !table_in(eh.e_shoff, eh.e_shnum, eh.e_shentsize, len) ||
	    eh.e_phentsize != sizeof(phdr_t)) {
		snprintf(err, cap, "truncated ELF file (%zu bytes; header tables past the end)", len);
		return -1;
	}
	for (unsigned i = 0; i < eh.e_phnum; i++) {
		phdr_t ph;

		memcpy(&ph, buf + eh.e_phoff + (size_t)i * sizeof(ph), sizeof(ph));
		if (ph.p_type == PT_LOAD && (ph.p_offset > len || ph.p_filesz > len - ph.p_offset)) {
			snprintf(err, cap, "truncated ELF file (%zu bytes; segment %u past the end)",
			    len, i);
			return -1;
		}
	}
	return 0;
}

/* A module already loaded from a file of these len bytes hashing to hash, or NULL. */
static struct loaded *
loaded_copy(size_t len, XXH64_hash_t hash)
{
	for (struct loaded *l = loaded; l != NULL; l = l->next)
		if ((size_t)l->size == len && l->hash == hash)
			return l;
	return NULL;
}

/* Reads the whole file of fd (st->st_size bytes) into a new memfd, then checks the file did
 * not change meanwhile. Returns the memfd, or -1 with err. */
static int
private_copy(int fd, const struct stat *st, const char *path, unsigned char **map, char *err,
    size_t cap)
{
	size_t len = (size_t)st->st_size;
	int mfd = memfd_create("lagless-module", MFD_CLOEXEC);
	struct stat after;
	unsigned char *p = MAP_FAILED;

	*map = NULL;
	if (mfd == -1 || ftruncate(mfd, st->st_size) == -1 ||
	    (p = mmap(NULL, len ? len : 1, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0)) ==
	    MAP_FAILED) {
		snprintf(err, cap, "%s: cannot make a private copy: %s", path, strerror(errno));
		goto fail;
	}
	for (size_t off = 0; off < len;) {
		ssize_t n = pread(fd, p + off, len - off, (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			snprintf(err, cap, "%s: %s while reading it", path, n == 0 ?
			    "the file shrank" : strerror(errno));
			goto fail;
		}
		off += (size_t)n;
	}
	if (fstat(fd, &after) == -1 || after.st_size != st->st_size ||
	    after.st_mtim.tv_sec != st->st_mtim.tv_sec ||
	    after.st_mtim.tv_nsec != st->st_mtim.tv_nsec) {
		snprintf(err, cap, "%s: the file changed while it was read (being written?); "
		    "not loaded", path);
		goto fail;
	}
	*map = p;
	return mfd;
fail:
	if (p != MAP_FAILED)
		munmap(p, len ? len : 1);
	if (mfd != -1)
		close(mfd);
	return -1;
}

/* One address range and whether it lies wholly inside a readable PT_LOAD segment of the object
 * loaded at base (dl_iterate_phdr(3) walks every loaded object). */
struct range_q {
	ElfW(Addr) base;
	uintptr_t p;
	size_t n;
	int found, inside;
	size_t avail;               /* bytes from p to the end of the segment holding it */
};

static int
range_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct range_q *q = arg;

	(void)size;
	if (info->dlpi_addr != q->base)
		return 0;
	q->found = 1;
	for (ElfW(Half) i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t lo = (uintptr_t)(info->dlpi_addr + ph->p_vaddr);

		if (ph->p_type == PT_LOAD && (ph->p_flags & PF_R) && q->p >= lo &&
		    q->p - lo <= ph->p_memsz && q->n <= ph->p_memsz - (q->p - lo)) {
			q->inside = 1;
			q->avail = ph->p_memsz - (q->p - lo);
		}
	}
	return 1;
}

/* Whether n bytes at p lie inside one readable segment of handle's image; the bytes left in
 * that segment from p into *avail when given. */
static int
in_image_avail(void *handle, const void *p, size_t n, size_t *avail)
{
	struct link_map *lm = NULL;
	struct range_q q = { 0, (uintptr_t)p, n, 0, 0, 0 };

	if (dlinfo(handle, RTLD_DI_LINKMAP, &lm) == -1 || lm == NULL)
		return 0;
	q.base = lm->l_addr;
	dl_iterate_phdr(range_cb, &q);
	if (avail != NULL)
		*avail = q.avail;
	return q.found && q.inside;
}

static int
in_image(void *handle, const void *p, size_t n)
{
	return in_image_avail(handle, p, n, NULL);
}

#define STR_MAX 4096 /* bytes a descriptor string may take, its NUL included */

/* A descriptor string: NULL (when optional), or NUL-terminated inside one readable segment of
 * the image, within STR_MAX bytes. */
static int
str_ok(void *handle, const char *s, int optional)
{
	size_t avail = 0;

	if (s == NULL)
		return optional;
	if (!in_image_avail(handle, s, 1, &avail))
		return 0;
	return memchr(s, '\0', avail < STR_MAX ? avail : STR_MAX) != NULL;
}

/* The ABI 1.1 declarations of kind k: each array inside the image, each name, default and
 * enum choice a string of the image. A stride the registry will refuse is not followed. */
static int
params_ok(void *handle, const struct lagless_kind *k, const struct lagless_param *arr,
    uint32_t n)
{
	if (arr == NULL || n == 0)
		return 1;
	if (k->param_size < sizeof(struct lagless_param) || k->param_size > 1024 || n > 64)
		return 1; /* the registry names it */
	if (!in_image(handle, arr, (size_t)n * k->param_size))
		return 0;
	for (uint32_t i = 0; i < n; i++) {
		const struct lagless_param *p = (const void *)((const char *)arr +
		    (size_t)i * k->param_size);
		size_t c = 0;

		if (!str_ok(handle, p->name, 0) || !str_ok(handle, p->def, 1))
			return 0;
		for (; p->choices != NULL; c++)
			if (c >= 64 || !in_image(handle, &p->choices[c], sizeof(char *)))
				return 0;
			else if (p->choices[c] == NULL)
				break;
			else if (!str_ok(handle, p->choices[c], 0))
				return 0;
	}
	return 1;
}

/* Every string and declaration array of m (whose kinds[] is known to lie in the image). */
static int
strings_ok(void *handle, const struct lagless_module *m, const char **what)
{
	*what = "signature, name or version";
	if (!str_ok(handle, m->signature, 1) || !str_ok(handle, m->name, 1) ||
	    !str_ok(handle, m->version, 1))
		return 0;
	for (uint32_t i = 0; m->kinds != NULL && i < m->nkinds; i++) {
		struct lagless_kind k;

		memset(&k, 0, sizeof(k));
		memcpy(&k, (const char *)m->kinds + (size_t)i * m->kind_size,
		    m->kind_size < sizeof(k) ? m->kind_size : sizeof(k));
		*what = "kind name or content type";
		if (!str_ok(handle, k.name, 1) || !str_ok(handle, k.ctype, 1))
			return 0;
		*what = "kind's declared parameters";
		if (!params_ok(handle, &k, k.query_params, k.nquery_params) ||
		    !params_ok(handle, &k, k.route_params, k.nroute_params))
			return 0;
	}
	return 1;
}

int
lg_modules_check_image(void *handle, const struct lagless_module *m, const char *path,
    char *err, size_t cap)
{
	const char *what;

	if (!in_image(handle, m, sizeof(*m))) {
		snprintf(err, cap, "%s: the %s descriptor (%zu bytes) does not lie inside the "
		    "module's loaded image; not loaded", path, LAGLESS_MODULE_SYMBOL, sizeof(*m));
		return -1;
	}
	if (m->magic != LAGLESS_MODULE_MAGIC || m->abi_major != LAGLESS_ABI_MAJOR)
		return 0; /* the registry names the mismatch; it reads nothing else of it */
	if (m->kind_size > LG_MODULE_KIND_SIZE_MAX || m->nkinds > LG_MODULE_NKINDS_MAX) {
		snprintf(err, cap, "%s: module descriptor says %u kinds of %u bytes; lagless takes "
		    "at most %u kinds of at most %u bytes (a corrupt or hand-made descriptor?)", path,
		    m->nkinds, m->kind_size, LG_MODULE_NKINDS_MAX, LG_MODULE_KIND_SIZE_MAX);
		return -1;
	}
	if (m->kinds != NULL && m->kind_size > 0 &&
	    !in_image(handle, m->kinds, (size_t)m->nkinds * m->kind_size)) {
		snprintf(err, cap, "%s: module descriptor says %u kinds of %u bytes, but that kinds[] "
		    "array does not lie inside the module's loaded image (nkinds larger than the "
		    "array?); not loaded", path, m->nkinds, m->kind_size);
		return -1;
	}
	if (!strings_ok(handle, m, &what)) {
		snprintf(err, cap, "%s: a string of the module descriptor (%s) does not lie inside "
		    "the module's loaded image or has no NUL there; not loaded", path, what);
		return -1;
	}
	return 0;
}

static int
open_copy(int mfd, const char *path, void **handle, const struct lagless_module **desc,
    char *err, size_t cap)
{
	char proc[64];

	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", mfd);
	dlerror();
	if ((*handle = dlopen(proc, RTLD_NOW | RTLD_LOCAL)) == NULL) {
		const char *e = dlerror();

		snprintf(err, cap, "%s: cannot load: %s", path, e ? e : "dlopen failed");
		return -1;
	}
	*desc = dlsym(*handle, LAGLESS_MODULE_SYMBOL);
	if (*desc == NULL) {
		snprintf(err, cap, "%s: no %s symbol: not a lagless module (build it with "
		    "LAGLESS_MODULE from lagless/module.h)", path, LAGLESS_MODULE_SYMBOL);
		dlclose(*handle); /* nothing of it ran or is referenced */
		return -1;
	}
	if (lg_modules_check_image(*handle, *desc, path, err, cap) == -1) {
		dlclose(*handle); /* only its constructors ran; nothing of it is referenced */
		return -1;
	}
	return 0;
}

int
lg_modules_open(const char *path, void **handle, const struct lagless_module **desc,
    uint64_t *content, char *err, size_t cap)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), mfd = -1, rc = -1;
	struct stat st;
	unsigned char *map = NULL;
	struct loaded *l;

	if (fd == -1 || fstat(fd, &st) == -1) {
		snprintf(err, cap, "%s: cannot open the module: %s", path, strerror(errno));
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(err, cap, "%s: the module is not a regular file", path);
		goto out;
	}
	if ((mfd = private_copy(fd, &st, path, &map, err, cap)) == -1)
		goto out;
	XXH64_hash_t hash = XXH3_64bits(map, (size_t)st.st_size);
	*content = hash;
	if ((l = loaded_copy((size_t)st.st_size, hash)) != NULL) {
		*handle = l->handle; /* the same bytes: reuse it (the new copy is closed) */
		*desc = l->desc;
		close(mfd);
		mfd = -1;
		rc = 0;
		goto out;
	}
	char why[160];
	if (lg_modules_check_elf(map, (size_t)st.st_size, why, sizeof(why)) == -1) {
		snprintf(err, cap, "%s: %s", path, why);
		goto out;
	}
	if (open_copy(mfd, path, handle, desc, err, cap) == -1)
		goto out;
	if ((l = calloc(1, sizeof(*l))) != NULL) {
		*l = (struct loaded){ st.st_size, hash, *handle, *desc, loaded };
		loaded = l;
	}
	rc = 0;
out:
	if (map != NULL)
		munmap(map, st.st_size ? (size_t)st.st_size : 1);
	/* A loaded copy's memfd stays open for good: glibc's dlopen recognises an object already
	 * loaded by its path name, so a reused /proc/self/fd/N would return the old module. */
	if (mfd != -1 && rc == -1)
		close(mfd);
	if (fd != -1)
		close(fd);
	return rc;
}
