// Staging (kernels/backend.h) for the CPU backends: everything happens at the call. "cpu"
// hands the kernels the host data itself; "cpu-staged" copies it into buffers of its own, two
// slots used in turn like the GPU's, so a model that reads a slot after its reuse, or host
// memory it did not put, gives other results there than on "cpu".
#include <stdlib.h>
#include <string.h>

#include "kernels/backend.h"
#include "kernels/base/check.h"
#include "kernels/base/spk_assert.h"
#include "kernels/cpu/staging.h"

struct spk_staging {
    int separate;  // copies into slots of its own
    int cur;       // the open slot
    struct {
        char *buf;
        size_t cap, used;
        char fetched[SPK_STAGING_FETCH_BYTES];
    } slot[2];
};

static spk_staging_t *create(int separate) {
    spk_staging_t *s = callocCheck(1, sizeof *s);
    s->separate = separate;
    return s;
}
spk_staging_t *spk_cpu_staging_create(void) { return create(0); }
spk_staging_t *spk_cpu_staging_create_separate(void) { return create(1); }

void spk_cpu_staging_free(spk_staging_t *s) {
    if (!s) return;
    for (int i = 0; i < 2; i++) free(s->slot[i].buf);
    free(s);
}

void spk_cpu_staging_begin(spk_staging_t *s, size_t bytes) {
    s->cur ^= 1;
    if (s->separate && bytes > s->slot[s->cur].cap) {
        free(s->slot[s->cur].buf);
        s->slot[s->cur].buf = mallocCheck(bytes);
        s->slot[s->cur].cap = bytes;
    }
    s->slot[s->cur].used = 0;
}

const void *spk_cpu_staging_put(spk_staging_t *s, const void *host, size_t bytes) {
    if (!s->separate) return host;
    char *p = s->slot[s->cur].buf + s->slot[s->cur].used;
    s->slot[s->cur].used += (bytes + SPK_STAGING_ALIGN - 1) / SPK_STAGING_ALIGN * SPK_STAGING_ALIGN;
    SPK_ASSERT(s->slot[s->cur].used <= s->slot[s->cur].cap || bytes == 0);
    if (bytes) memcpy(p, host, bytes);
    return p;
}

void spk_cpu_staging_ready(spk_staging_t *s) { (void)s; }

void spk_cpu_staging_fetch(spk_staging_t *s, const void *src, size_t bytes) {
    SPK_ASSERT(bytes <= SPK_STAGING_FETCH_BYTES);
    memcpy(s->slot[s->cur].fetched, src, bytes);
}

const void *spk_cpu_staging_fetched(spk_staging_t *s, int age) {
    SPK_ASSERT(age == 0 || age == 1);
    return s->slot[s->cur ^ age].fetched;
}
