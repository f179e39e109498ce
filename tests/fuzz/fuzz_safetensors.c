// libFuzzer target: the safetensors reader (io/export/safetensors.h) on the input bytes as a
// file. An accepted file keeps the reader's promises -- known dtypes, sizes that match the
// shapes, tensors tiling the data section, data inside it, metadata as strings -- and a
// refused one gets one sentence naming the file.
#include "io/export/safetensors.h"
#include "tests/fuzz/fuzz_build.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    safetensors_t st;
    char err[1024] = "";
    if (safetensors_parse(data, size, "f.safetensors", &st, err, sizeof err) != 0) {
        FZ_REQUIRE(strncmp(err, "f.safetensors: ", 15) == 0);
        return 0;
    }
    uint64_t header;
    memcpy(&header, data, 8);
    const size_t data_len = size - 8 - (size_t)header;
    int64_t bytes = 0;
    for (int i = 0; i < st.count; i++) {
        const st_tensor_t *t = &st.t[i];
        const int64_t elem = t->dtype == ST_F32 ? 4 : 8;
        FZ_REQUIRE((t->dtype == ST_F32 || t->dtype == ST_I64) && t->ndim >= 0 && t->ndim <= ST_MAX_DIMS);
        int64_t n = 1;
        for (int d = 0; d < t->ndim; d++) n *= t->shape[d];
        FZ_REQUIRE(n == t->numel);
        const char *p = t->data, *lo = st.image;
        FZ_REQUIRE(p >= lo && p + t->numel * elem <= lo + data_len);
        bytes += t->numel * elem;
        FZ_REQUIRE(safetensors_find(&st, t->name) == t);  // names are unique
    }
    FZ_REQUIRE(bytes == (int64_t)data_len);
    for (int i = 0; i < st.nmeta; i++) FZ_REQUIRE(safetensors_meta(&st, st.meta_keys[i]) != NULL);
    safetensors_free(&st);
    return 0;
}
