/* brilrt: the run-time library of Bril programs compiled to native code (`brilc`).
 *
 * What it gives the generated code (bril/backend/llvm_lower.py declares the same
 * names; keep the two in step):
 *
 *   - the heap: a table of regions (`brt_regions`), one entry per `alloc`,
 *     indexed by the region id that error messages print as "base";
 *   - printing in Bril's exact format (floats as JavaScript's
 *     toFixed(17)/toExponential(17)), batched in one output buffer;
 *   - @main argument parsing by declared type, with the interpreter's messages;
 *   - errors: one line `error: MESSAGE` on stderr, exit status 2, after the
 *     output printed so far;
 *   - the dynamic instruction counter and the call-depth limit.
 *
 * Heap layout.  A pointer is the pair {region id, offset} (two i64).  Region
 * `r` owns one block of memory: `len` cells of the element type's natural
 * size (bool 1 byte, char 4: a code point, int and float 8, pointer 16: id
 * then offset), then `len` bytes of "initialised" flags (a scalar cell
 * that reads other than zero was stored to: a store of zero sets its flag,
 * the interpreter's stores of anything else may not).  Freeing
 * releases the block and sets `len` to 0, so every later access through any
 * pointer into the region fails the one bounds test `(uint64)off < len` with
 * the same message as an illegal offset, exactly as the interpreter reports
 * both.  Ids are never reused (messages print them).  Generated code does
 * loads and stores inline; only alloc and free call in here.  Large regions
 * are mapped lazily, so (as in the interpreter) a huge, barely used region
 * costs almost nothing.
 *
 * The in-process build (-DBRT_JIT, a shared library: bril.native_runtime.nativert.runtime_library)
 * serves the JIT and the interpreter's native heap (bril.interpreter.heap.NativeHeap): no
 * `main`; output goes to a growable buffer drained by brt_out_take; an error
 * stores its message (brt_error_message) and longjmps back to the innermost
 * brt_jit_call(fn, slots), which then returns -1; brt_py_alloc / brt_py_free
 * are the heap's entries for Python; regions freed by native code are logged
 * in brt_freed so that Python drops its views of them; brt_heap_reset starts
 * a new program.  The executable build is unchanged by all this.
 */

#define _GNU_SOURCE
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* The messages, from bril/ir/messages.py (written next to this file when it is built). */
#include "brilrt_messages.h"

#define NORETURN __attribute__((noreturn))

/* --- errors ------------------------------------------------------------------------ */

static void out_flush(void);

#ifndef BRT_JIT

NORETURN void brt_fail(const char *msg) {
    out_flush();
    fprintf(stderr, "error: %s\n", msg);
    fflush(stderr);
    _exit(2);
}

#else /* BRT_JIT: in process (bril.native_runtime.nativert.runtime_library) */

/* An error stores its message and jumps back to the innermost active
 * brt_jit_call (or brt_py_alloc / brt_py_free), which returns -1; the output
 * stays in the buffer for brt_out_take. */
#include <setjmp.h>

static char error_message[1024];
static __thread jmp_buf *jmp_top;

NORETURN void brt_fail(const char *msg) {
    if (msg != error_message) {
        size_t n = strlen(msg);
        if (n >= sizeof error_message) n = sizeof error_message - 1;
        memcpy(error_message, msg, n);
        error_message[n] = '\0';
    }
    if (jmp_top) longjmp(*jmp_top, 1);
    /* No trampoline (a misuse): fail as an executable would. */
    fprintf(stderr, "error: %s\n", error_message);
    fflush(stderr);
    _exit(2);
}

const char *brt_error_message(void) {
    return error_message;
}

int64_t brt_jit_call(void *fn, int64_t *slots) {
    jmp_buf here;
    jmp_buf *volatile saved = jmp_top;
    error_message[0] = '\0';
    if (setjmp(here)) {
        jmp_top = saved;
        return -1;
    }
    jmp_top = &here;
    int64_t r = ((int64_t (*)(int64_t *))fn)(slots);
    jmp_top = saved;
    return r;
}

#endif

static NORETURN void failf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static NORETURN void failf(const char *fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    brt_fail(buf);
}

/* --- output ------------------------------------------------------------------------- */

#ifndef BRT_JIT

static char out_buf[1 << 16];
static size_t out_len;

static void out_flush(void) {
    size_t done = 0;
    while (done < out_len) {
        ssize_t n = write(1, out_buf + done, out_len - done);
        if (n <= 0) break;              /* closed pipe: drop the rest, as a crash would */
        done += (size_t)n;
    }
    out_len = 0;
}

static void out_write(const char *s, size_t n) {
    if (out_len + n > sizeof out_buf) {
        out_flush();
        if (n > sizeof out_buf) {
            out_len = 0;
            while (n > 0) {
                ssize_t w = write(1, s, n);
                if (w <= 0) return;
                s += w;
                n -= (size_t)w;
            }
            return;
        }
    }
    memcpy(out_buf + out_len, s, n);
    out_len += n;
}

static void out_char(char c) {
    if (out_len == sizeof out_buf) out_flush();
    out_buf[out_len++] = c;
}

#else /* BRT_JIT: a growable buffer that Python drains (brt_out_take) */

static char *out_buf;
size_t brt_out_len;         /* bytes waiting (Python reads it to skip empty takes) */
#define out_len brt_out_len
static size_t out_cap;

static __attribute__((unused)) void out_flush(void) {}

static void out_reserve(size_t n) {
    if (out_len + n <= out_cap) return;
    size_t cap = out_cap ? out_cap : 1 << 16;
    while (cap < out_len + n) cap *= 2;
    char *p = realloc(out_buf, cap);
    if (!p) {
        out_len = 0;            /* out of memory: drop the output rather than crash */
        brt_fail(BRT_MSG_OUT_OF_MEMORY);
    }
    out_buf = p;
    out_cap = cap;
}

static void out_write(const char *s, size_t n) {
    out_reserve(n);
    memcpy(out_buf + out_len, s, n);
    out_len += n;
}

static void out_char(char c) {
    if (out_len == out_cap) out_reserve(1);
    out_buf[out_len++] = c;
}

/* The output printed since the last call (*len bytes, valid until the next
 * output); the buffer is then empty. */
char *brt_out_take(size_t *len) {
    *len = out_len;
    out_len = 0;
    return out_buf;
}

#endif

/* A double as JavaScript prints x.toFixed(17) (|log10 x| < 10) or
 * x.toExponential(17) (otherwise): what bril.ir.values.format_float does.
 * C's printf rounds exact decimal ties to even, JavaScript away from zero;
 * ties are rare and detected cheaply, then rounded by hand on exact digits. */

static int round_up_digits(char *s, int n) {
    /* Add one unit in the last place to the decimal digits s[0..n) (skipping '.');
     * returns 1 if a carry came out of the first digit. */
    for (int i = n - 1; i >= 0; i--) {
        if (s[i] == '.') continue;
        if (s[i] == '9') {
            s[i] = '0';
        } else {
            s[i]++;
            return 0;
        }
    }
    return 1;
}

static int format_exp_digits(char *buf, size_t size, int neg, const char *mant, int exp) {
    return snprintf(buf, size, "%s%se%c%d", neg ? "-" : "", mant, exp < 0 ? '-' : '+',
                    exp < 0 ? -exp : exp);
}

int brt_format_float(char *buf, size_t size, double x) {
    if (isnan(x)) return snprintf(buf, size, "NaN");
    if (x == 0.0) return snprintf(buf, size, signbit(x) ? "-0.00000000000000000" : "0.00000000000000000");
    double ax = fabs(x);
    int neg = x < 0;
    if (isinf(x)) return snprintf(buf, size, neg ? "-Infinity" : "Infinity");
    if (fabs(log10(ax)) >= 10) {
        char tmp[64];
        if (ax < 1e18 && ax >= 1e10 && ax != floor(ax)) {
            /* Possibly a tie at 18 significant digits: the exact value has at
             * most 37 significant digits, so 41 printed digits are exact. */
            snprintf(tmp, sizeof tmp, "%.40e", ax);
            char *e = strchr(tmp, 'e');
            int exp = atoi(e + 1);
            char mant[24];
            memcpy(mant, tmp, 19);     /* d.ddddddddddddddddd: 1 + 17 digits */
            mant[19] = '\0';
            if (tmp[19] >= '5' && round_up_digits(mant, 19)) {
                memcpy(mant, "1.00000000000000000", 20);
                exp += 1;
            }
            return format_exp_digits(buf, size, neg, mant, exp);
        }
        snprintf(tmp, sizeof tmp, "%.17e", ax);
        char *e = strchr(tmp, 'e');
        *e = '\0';
        return format_exp_digits(buf, size, neg, tmp, atoi(e + 1));
    }
    double scaled = ax * 262144.0;     /* 2**18 */
    if (scaled == floor(scaled) && ax * 131072.0 != floor(ax * 131072.0)) {
        /* x is an odd multiple of 2**-18: exactly 18 decimals, the last a 5. */
        char tmp[64];
        int n = snprintf(tmp, sizeof tmp, "%.18f", ax);
        tmp[n - 1] = '\0';
        n -= 1;
        int carry = round_up_digits(tmp, n);
        return snprintf(buf, size, "%s%s%s", neg ? "-" : "", carry ? "1" : "", tmp);
    }
    return snprintf(buf, size, "%.17f", x);
}

static void print_end(int32_t end) {
    out_char((char)end);
}

void brt_print_int(int64_t v, int32_t end) {
    /* Digits by hand, from the end: snprintf's "%lld" costs several times more,
     * and a program printing half a million numbers spends most of its time here. */
    char tmp[24];
    char *p = tmp + sizeof tmp;
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;    /* (INT64_MIN too) */
    do {
        *--p = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0) *--p = '-';
    out_write(p, (size_t)(tmp + sizeof tmp - p));
    print_end(end);
}

void brt_print_bool(int32_t v, int32_t end) {
    if (v)
        out_write("true", 4);
    else
        out_write("false", 5);
    print_end(end);
}

void brt_print_float(double v, int32_t end) {
    char tmp[128];
    int n = brt_format_float(tmp, sizeof tmp, v);
    out_write(tmp, (size_t)n);
    print_end(end);
}

static int utf8_encode(char *s, uint32_t c) {
    if (c < 0x80) {
        s[0] = (char)c;
        return 1;
    }
    if (c < 0x800) {
        s[0] = (char)(0xC0 | (c >> 6));
        s[1] = (char)(0x80 | (c & 0x3F));
        return 2;
    }
    if (c < 0x10000) {
        s[0] = (char)(0xE0 | (c >> 12));
        s[1] = (char)(0x80 | ((c >> 6) & 0x3F));
        s[2] = (char)(0x80 | (c & 0x3F));
        return 3;
    }
    s[0] = (char)(0xF0 | (c >> 18));
    s[1] = (char)(0x80 | ((c >> 12) & 0x3F));
    s[2] = (char)(0x80 | ((c >> 6) & 0x3F));
    s[3] = (char)(0x80 | (c & 0x3F));
    return 4;
}

void brt_print_char(int32_t c, int32_t end) {
    char tmp[4];
    out_write(tmp, (size_t)utf8_encode(tmp, (uint32_t)c));
    print_end(end);
}

void brt_print_ptr(int32_t end) {
    out_write("[object Object]", 15);      /* how JavaScript prints an object */
    print_end(end);
}

void brt_print_newline(void) {
    out_char('\n');
}

/* --- run-time errors the generated code raises ------------------------------------- */

NORETURN void brt_fail_access(int64_t region, int64_t offset) {
    failf(BRT_MSG_BAD_ACCESS, (long long)region,
          (long long)offset);
}

NORETURN void brt_fail_uninit(const char *name) {
    failf(BRT_MSG_UNINITIALIZED, name);
}

NORETURN void brt_fail_char(int64_t value) {
    failf(BRT_MSG_BAD_CHAR, (long long)value);
}

/* --- the heap ------------------------------------------------------------------------ */

/* An entry is one cache line: a small region's cells (and flags) live in the
 * entry itself (`data` points at `cells`), so that following a pointer to one
 * -- a tree's node, a list's cell -- touches one line, not the table's line and
 * then the block's.  The table is reserved once and never moves (inline cells
 * have a fixed address: Python's views of them and native code rely on it). */
#define INLINE_BYTES 48
typedef struct {
    unsigned char *data;    /* len cells, then len init flags; NULL once freed */
    int64_t len;            /* 0 once freed (alloc sizes are positive) */
    unsigned char cells[INLINE_BYTES];  /* a small region's cells (then flags) */
} brt_region;

brt_region *brt_regions;
static int64_t region_count, region_cap, live_regions;
#ifdef BRT_JIT
/* Each region's cell size, by id: Python's views of a region check it
 * (bril.interpreter.heap.NativeHeap._region). */
unsigned char *brt_cell_sizes;
#endif

/* Freed entries, counted per page of the table: a page whose every entry was
 * allocated and freed is given back to the system (it reads as zeros again:
 * data NULL, len 0, as a freed entry), so a program that allocates and frees
 * in a loop does not keep a cache line per allocation it ever made. */
#define TABLE_PAGE 4096
#define ENTRIES_PER_PAGE (TABLE_PAGE / (int64_t)sizeof(brt_region))
static unsigned char *page_frees;

static void entry_freed(int64_t region) {
    if (page_frees != NULL && ++page_frees[region / ENTRIES_PER_PAGE] == ENTRIES_PER_PAGE)
        madvise(&brt_regions[region - region % ENTRIES_PER_PAGE], TABLE_PAGE, MADV_DONTNEED);
}

/* brt_alloc's cell_size argument with this bit: the cells carry no "initialised"
 * flags (a ptr<any> cell is its own flag: its tag word is 0 until stored to). */
#define BRT_NO_FLAGS 0x100

int64_t brt_dyn_count;      /* dynamic instructions, added by generated code */
int64_t brt_depth;          /* nested Bril calls, kept by generated code */

/* Regions larger than JavaScript arrays allow are refused, as the interpreter
 * refuses them (bril/interpreter/heap.py MAX_REGION). */
#define MAX_REGION ((1LL << 32) - 1)

/* A region's block starts with this header; `data` points just after it.
 * Large blocks are mapped lazily (MAP_NORESERVE): as in the interpreter, a huge
 * region that is barely used costs (almost) nothing. */
typedef struct {
    size_t bytes;           /* mapped size, or 0 if from calloc */
    size_t pad;             /* (cells stay 16-byte aligned) */
} block_header;

#define MAP_THRESHOLD ((size_t)1 << 20)
#define HUGE_THRESHOLD ((size_t)4 << 20)

/* Reserve the region table's address space once (it never moves); pages are
 * touched only as ids are used.  Less if the system refuses a large mapping. */
static void table_reserve(void) {
    if (brt_regions != NULL)
        brt_fail(BRT_MSG_OUT_OF_MEMORY);
    for (int64_t cap = (int64_t)1 << 30; cap >= ((int64_t)1 << 16); cap >>= 2) {
        void *p = mmap(NULL, (size_t)cap * sizeof(brt_region), PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p != MAP_FAILED) {
#ifdef BRT_JIT
            void *sizes = mmap(NULL, (size_t)cap, PROT_READ | PROT_WRITE,
                               MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
            if (sizes == MAP_FAILED) {
                munmap(p, (size_t)cap * sizeof(brt_region));
                continue;
            }
            brt_cell_sizes = sizes;
#endif
            brt_regions = p;
            region_cap = cap;
            if (sysconf(_SC_PAGESIZE) == TABLE_PAGE) {
                void *counts = mmap(NULL, (size_t)(cap / ENTRIES_PER_PAGE), PROT_READ | PROT_WRITE,
                                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
                page_frees = counts == MAP_FAILED ? NULL : counts;
            }
            return;
        }
    }
    brt_fail(BRT_MSG_OUT_OF_MEMORY);
}

static unsigned char *block_alloc(size_t cells, size_t cell_size, int flags) {
    size_t bytes = sizeof(block_header) + cells * (cell_size + (flags ? 1 : 0));
    block_header *h;
    if (bytes >= MAP_THRESHOLD) {
        void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED) return NULL;
#ifdef MADV_HUGEPAGE
        /* Huge pages for big regions: a program that walks one spends most of its
         * time in page faults otherwise (one per 4 KiB touched). */
        if (bytes >= HUGE_THRESHOLD)
            madvise(p, bytes, MADV_HUGEPAGE);
#endif
        h = p;
        h->bytes = bytes;
    } else {
        h = calloc(1, bytes);
        if (!h) return NULL;
        h->bytes = 0;
    }
    return (unsigned char *)(h + 1);
}

static int is_inline(int64_t region) {
    return brt_regions[region].data == brt_regions[region].cells;
}

static void block_free(unsigned char *data) {
    block_header *h = (block_header *)data - 1;
    if (h->bytes)
        munmap(h, h->bytes);
    else
        free(h);
}

#ifdef BRT_JIT
/* Ids of the regions freed since Python last looked (bril.interpreter.heap.NativeHeap.sync
 * reads brt_freed[0..brt_freed_len) and sets brt_freed_len to 0), so that it
 * can drop its views of freed memory. */
int64_t *brt_freed;
int64_t brt_freed_len;
static int64_t freed_cap;

static void free_log_add(int64_t region) {
    if (brt_freed_len == freed_cap) {
        int64_t cap = freed_cap ? freed_cap * 2 : 256;
        int64_t *p = realloc(brt_freed, (size_t)cap * sizeof *p);
        if (!p) brt_fail(BRT_MSG_OUT_OF_MEMORY);
        brt_freed = p;
        freed_cap = cap;
    }
    brt_freed[brt_freed_len++] = region;
}
#endif

int64_t brt_alloc(int64_t amount, int64_t cell_size) {
    if (amount <= 0) failf(BRT_MSG_ALLOC_NOT_POSITIVE, (long long)amount);
    if (amount > MAX_REGION) failf(BRT_MSG_ALLOC_TOO_LARGE, (long long)amount);
    if (region_count == region_cap)
        table_reserve();
    int flags = !(cell_size & BRT_NO_FLAGS);
    cell_size &= BRT_NO_FLAGS - 1;
    int64_t id = region_count++;
    brt_region *r = &brt_regions[id];
    if (amount * (cell_size + flags) <= INLINE_BYTES) {
        memset(r->cells, 0, INLINE_BYTES);   /* (an id used before brt_heap_reset) */
        r->data = r->cells;
    } else {
        r->data = block_alloc((size_t)amount, (size_t)cell_size, flags);
        if (!r->data) {
            region_count--;
            failf(BRT_MSG_ALLOC_TOO_LARGE, (long long)amount);
        }
    }
    r->len = amount;
#ifdef BRT_JIT
    brt_cell_sizes[id] = (unsigned char)cell_size;
#endif
    live_regions++;
    return id;
}

void brt_free(int64_t region, int64_t offset) {
    if (offset != 0 || brt_regions[region].data == NULL)
        failf(BRT_MSG_BAD_FREE, (long long)region, (long long)offset);
    if (!is_inline(region))
        block_free(brt_regions[region].data);
    brt_regions[region].data = NULL;
    brt_regions[region].len = 0;
    live_regions--;
    entry_freed(region);
#ifdef BRT_JIT
    free_log_add(region);
#endif
}

#ifdef BRT_JIT
/* For the interpreter's native heap (bril.interpreter.heap.NativeHeap), which calls these
 * through ctypes: no trampoline is active there, so errors return -1 with the
 * message in brt_error_message(). */

static void region_free(int64_t region) {
    if (!is_inline(region))
        block_free(brt_regions[region].data);
    brt_regions[region].data = NULL;
    brt_regions[region].len = 0;
    live_regions--;
    entry_freed(region);
}

/* A new region's data address (its id in *id), or 0 after an error. */
int64_t brt_py_alloc(int64_t amount, int64_t cell_size, int64_t *id) {
    jmp_buf here;
    jmp_buf *volatile saved = jmp_top;
    error_message[0] = '\0';
    if (setjmp(here)) {
        jmp_top = saved;
        return 0;
    }
    jmp_top = &here;
    *id = brt_alloc(amount, cell_size);
    jmp_top = saved;
    return (int64_t)(intptr_t)brt_regions[*id].data;
}

/* Free from Python (which drops its views itself: not logged in brt_freed). */
int64_t brt_py_free(int64_t region, int64_t offset) {
    if (region < 0 || region >= region_count || offset != 0 || brt_regions[region].data == NULL) {
        snprintf(error_message, sizeof error_message, BRT_MSG_BAD_FREE,
                 (long long)region, (long long)offset);
        return -1;
    }
    region_free(region);
    return 0;
}

int64_t brt_live_regions(void) {
    return live_regions;
}

int64_t brt_region_count(void) {
    return region_count;
}

/* Free every region and start ids from 0 again (a new program run). */
void brt_heap_reset(void) {
    for (int64_t i = 0; i < region_count; i++)
        if (brt_regions[i].data && !is_inline(i)) block_free(brt_regions[i].data);
    if (page_frees != NULL)
        memset(page_frees, 0, (size_t)((region_count + ENTRIES_PER_PAGE - 1) / ENTRIES_PER_PAGE));
    region_count = 0;
    live_regions = 0;
    brt_freed_len = 0;
    brt_dyn_count = 0;
    brt_depth = 0;
    out_len = 0;
}
#endif

/* --- counters -------------------------------------------------------------------------- */

/* brt_dyn_count (dynamic instructions, added by generated code) and brt_depth
 * (nested Bril calls, kept by generated code) are defined with the heap. */

/* MAX_CALL_DEPTH, the limit on nested calls, comes with the messages (bril/ir/messages.py). */

NORETURN void brt_fail_depth(void) {
    failf(BRT_MSG_RECURSION, (long long)MAX_CALL_DEPTH);
}

/* --- @main arguments (bril/ir/values.py parse_*_arg, JavaScript's Number/parseFloat) ------ */

/* Decode UTF-8 into code points; returns the count (invalid bytes map to U+FFFD). */
static size_t utf8_decode(const char *s, uint32_t *out) {
    const unsigned char *p = (const unsigned char *)s;
    size_t n = 0;
    while (*p) {
        uint32_t c = *p;
        int extra = c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : c >= 0xC0 ? 1 : 0;
        if (c >= 0x80 && extra == 0) {
            out[n++] = 0xFFFD;
            p++;
            continue;
        }
        if (extra) c &= (0x3F >> extra);
        p++;
        for (int i = 0; i < extra; i++) {
            if ((*p & 0xC0) != 0x80) {
                c = 0xFFFD;
                break;
            }
            c = (c << 6) | (*p++ & 0x3F);
        }
        out[n++] = c;
    }
    return n;
}

static int js_space(uint32_t c) {
    switch (c) {
    case '\t': case '\n': case '\v': case '\f': case '\r': case ' ':
    case 0xA0: case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F:
    case 0x3000: case 0xFEFF:
        return 1;
    default:
        return c >= 0x2000 && c <= 0x200A;
    }
}

typedef struct {
    uint32_t *cp;
    size_t n;
} text;

static text strip(text t, int left_only) {
    while (t.n && js_space(t.cp[0])) {
        t.cp++;
        t.n--;
    }
    while (!left_only && t.n && js_space(t.cp[t.n - 1])) t.n--;
    return t;
}

static int is_digit(uint32_t c) { return c >= '0' && c <= '9'; }

/* Length of the longest prefix of t matching [+-]?(Infinity|(D+(.D*)?|.D+)([eE][+-]?D+)?),
 * or 0 if none. */
static size_t decimal_prefix(text t) {
    size_t i = 0;
    if (i < t.n && (t.cp[i] == '+' || t.cp[i] == '-')) i++;
    static const char inf[] = "Infinity";
    size_t k = 0;
    while (k < 8 && i + k < t.n && t.cp[i + k] == (uint32_t)inf[k]) k++;
    if (k == 8) return i + 8;
    size_t start = i, digits = 0;
    while (i < t.n && is_digit(t.cp[i])) i++, digits++;
    if (i < t.n && t.cp[i] == '.') {
        size_t j = i + 1, frac = 0;
        while (j < t.n && is_digit(t.cp[j])) j++, frac++;
        if (digits == 0 && frac == 0) return 0;
        i = j;
    } else if (digits == 0) {
        return 0;
    }
    (void)start;
    if (i < t.n && (t.cp[i] == 'e' || t.cp[i] == 'E')) {
        size_t j = i + 1;
        if (j < t.n && (t.cp[j] == '+' || t.cp[j] == '-')) j++;
        size_t exp_digits = 0;
        while (j < t.n && is_digit(t.cp[j])) j++, exp_digits++;
        if (exp_digits) i = j;
    }
    return i;
}

/* The double of a matched decimal (ASCII) prefix of length n. */
static double decimal_value(text t, size_t n) {
    char buf[512];
    char *s = n < sizeof buf ? buf : malloc(n + 1);
    for (size_t i = 0; i < n; i++) s[i] = (char)t.cp[i];
    s[n] = '\0';
    double v;
    const char *body = s + (s[0] == '+' || s[0] == '-');
    if (strcmp(body, "Infinity") == 0)
        v = s[0] == '-' ? -INFINITY : INFINITY;
    else
        v = strtod(s, NULL);
    if (s != buf) free(s);
    return v;
}

/* JavaScript Number(s) on a stripped string: kind 1 = an exact radix integer
 * (in *big, *overflow set when it does not fit 64 bits unsigned), kind 0 = a
 * double in *num (NaN if the string is not a number). */
static int js_number(text t, double *num, uint64_t *big, int *overflow) {
    *overflow = 0;
    if (t.n == 0) {
        *num = 0.0;
        return 0;
    }
    if (t.n > 2 && t.cp[0] == '0') {
        int base = 0;
        uint32_t c = t.cp[1] | 0x20;
        if (c == 'x') base = 16;
        if (c == 'o') base = 8;
        if (c == 'b') base = 2;
        if (base) {
            uint64_t v = 0;
            for (size_t i = 2; i < t.n; i++) {
                uint32_t d = t.cp[i];
                int dv = is_digit(d) ? (int)(d - '0')
                       : ((d | 0x20) >= 'a' && (d | 0x20) <= 'f') ? (int)((d | 0x20) - 'a' + 10)
                       : 99;
                if (dv >= base) {
                    *num = NAN;
                    return 0;
                }
                if (v > (UINT64_MAX - (uint64_t)dv) / (uint64_t)base) *overflow = 1;
                v = v * (uint64_t)base + (uint64_t)dv;
            }
            *big = v;
            return 1;
        }
    }
    size_t n = decimal_prefix(t);
    *num = (n == t.n) ? decimal_value(t, n) : NAN;
    return 0;
}

static void arg_text(const char *s, text *t, uint32_t **store) {
    size_t len = strlen(s);
    *store = malloc((len + 1) * sizeof(uint32_t));
    t->cp = *store;
    t->n = utf8_decode(s, *store);
}

int64_t brt_arg_int(const char *s) {
    uint32_t *store;
    text t;
    arg_text(s, &t, &store);
    t = strip(t, 0);
    /* [+-]?[0-9]+ is read exactly (no detour through a double). */
    size_t i = (t.n && (t.cp[0] == '+' || t.cp[0] == '-')) ? 1 : 0;
    int all_digits = t.n > i;
    for (size_t j = i; j < t.n; j++)
        if (!is_digit(t.cp[j])) all_digits = 0;
    if (all_digits) {
        int neg = t.cp[0] == '-';
        uint64_t v = 0, limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
        for (size_t j = i; j < t.n; j++) {
            uint64_t d = t.cp[j] - '0';
            if (v > (limit - d) / 10) failf(BRT_MSG_MAIN_INT_RANGE, s);
            v = v * 10 + d;
        }
        free(store);
        return neg ? (int64_t)(0 - v) : (int64_t)v;
    }
    double num;
    uint64_t big;
    int overflow;
    if (js_number(t, &num, &big, &overflow)) {
        if (overflow || big > (uint64_t)INT64_MAX)
            failf(BRT_MSG_MAIN_INT_RANGE, s);
        free(store);
        return (int64_t)big;
    }
    if (isnan(num) || isinf(num) || num != floor(num))
        failf(BRT_MSG_MAIN_INT, s);
    if (num >= 9223372036854775808.0 || num < -9223372036854775808.0)
        failf(BRT_MSG_MAIN_INT_RANGE, s);
    free(store);
    return (int64_t)num;
}

double brt_arg_float(const char *s) {
    uint32_t *store;
    text t;
    arg_text(s, &t, &store);
    text left = strip(t, 1);
    size_t n = decimal_prefix(left);
    double f = n ? decimal_value(left, n) : NAN;      /* parseFloat */
    double num;
    uint64_t big;
    int overflow;
    int ok;
    if (js_number(strip(t, 0), &num, &big, &overflow))   /* Number: a radix integer */
        ok = !isnan(f) && !overflow && (double)big == f && big == (uint64_t)f;
    else
        ok = !isnan(f) && f == num;
    if (!ok) failf(BRT_MSG_MAIN_FLOAT, s);
    free(store);
    return f;
}

int32_t brt_arg_bool(const char *s) {
    if (strcmp(s, "true") == 0) return 1;
    if (strcmp(s, "false") == 0) return 0;
    failf(BRT_MSG_MAIN_BOOL, s);
}

int32_t brt_arg_char(const char *s) {
    uint32_t *store;
    text t;
    arg_text(s, &t, &store);
    if (t.n != 1) failf(BRT_MSG_MAIN_CHAR, s);
    int32_t c = (int32_t)t.cp[0];
    free(store);
    return c;
}

void brt_check_arity(int64_t expected, int64_t got) {
    if (expected != got)
        failf(BRT_MSG_MAIN_ARITY, (long long)expected,
              (long long)got);
}

/* --- the program's entry ------------------------------------------------------------- */

#ifndef BRT_JIT

/* Defined by the generated code: checks and parses @main's arguments, runs @main. */
extern void bril_start(int64_t argc, char **argv);
/* Defined by the generated code: 1 if it keeps brt_dyn_count (brilc without --no-count). */
extern const unsigned char bril_counts;

struct start_args {
    int64_t argc;
    char **argv;
};

static void on_segv(int sig) {
    (void)sig;
    static const char msg[] = "error: native stack overflow\n";
    out_flush();
    ssize_t r = write(2, msg, sizeof msg - 1);
    (void)r;
    _exit(2);
}

/* A stack overflow ends in one line and exit status 2, not a crash: the handler
 * runs on an alternate stack (one per thread). */
static void catch_stack_overflow(void) {
    static __thread char alt_stack[1 << 16];
    stack_t ss = {.ss_sp = alt_stack, .ss_size = sizeof alt_stack, .ss_flags = 0};
    sigaltstack(&ss, NULL);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_segv;
    sa.sa_flags = SA_ONSTACK;
    sigaction(SIGSEGV, &sa, NULL);
}

static void *run_main(void *p) {
    struct start_args *a = p;
    catch_stack_overflow();
    bril_start(a->argc, a->argv);
    return NULL;
}

/* Deep recursion (up to MAX_CALL_DEPTH calls) needs more than the default stack. */
#define MAIN_STACK ((size_t)1 << 30)

int main(int argc, char **argv) {
    int profile = 0;
    char **args = malloc(sizeof(char *) * (size_t)(argc + 1));
    int64_t nargs = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0) {
            for (i++; i < argc; i++) args[nargs++] = argv[i];
            break;
        }
        if (strcmp(argv[i], "-p") == 0)
            profile = 1;             /* as in brili, -p may appear anywhere */
        else
            args[nargs++] = argv[i];
    }
    args[nargs] = NULL;
    if (profile && !bril_counts)
        brt_fail("-p needs instruction counts, which this program was compiled without "
                 "(brilc --no-count)");

    struct start_args start = {nargs, args};
    pthread_attr_t attr;
    pthread_t thread;
    pthread_attr_init(&attr);
    if (pthread_attr_setstacksize(&attr, MAIN_STACK) != 0 ||
        pthread_create(&thread, &attr, run_main, &start) != 0) {
        run_main(&start);            /* no big stack available: run here */
    } else {
        pthread_join(thread, NULL);
    }
    if (live_regions != 0) brt_fail(BRT_MSG_LEAK);
    out_flush();
    if (profile) fprintf(stderr, "total_dyn_inst: %lld\n", (long long)brt_dyn_count);
    return 0;
}

#endif /* !BRT_JIT */
