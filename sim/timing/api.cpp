// The C interface of the timing model, called through ctypes (sim/timing/__init__.py).
#include "model.h"

using namespace timing;


extern "C" {

int64_t tm_n_fields() { return N_FIELDS; }
int64_t tm_n_params() { return N_PARAMS; }
int64_t tm_n_results() { return N_RESULTS; }

void* tm_new() { return new Model(); }
void tm_free(void* handle) { delete static_cast<Model*>(handle); }

// Simulates `n` instructions (rows of N_FIELDS fields); fills `result` (N_RESULTS slots).
int tm_run(void* handle, const int64_t* fields, int64_t n, const int64_t* params,
           int64_t* result) {
    Model* m = static_cast<Model*>(handle);
    *m = Model();
    m->init(fields, n, params);
    m->status = m->run();
    std::memset(result, 0, N_RESULTS * sizeof(int64_t));
    m->results(result);
    return m->status;
}

int64_t tm_trace_length(void* handle) { return int64_t(static_cast<Model*>(handle)->tr.out.size()); }
void tm_trace_copy(void* handle, int64_t* out) {
    const std::vector<int64_t>& v = static_cast<Model*>(handle)->tr.out;
    std::memcpy(out, v.data(), v.size() * sizeof(int64_t));
}

}  // extern "C"
