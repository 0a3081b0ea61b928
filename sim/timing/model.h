// The timing model (sim/timing/__init__.py): its types and the `Model` class, whose methods live
// in fetch.cpp, memory.cpp, store.cpp, fast.cpp and modules.cpp; api.cpp is the C interface.
//
// Structure: a discrete-event simulation.  The three execution modules (load, compute, store)
// are event processes: one event per instruction start, retirement or token wait, with the
// sequencer's handshake (pop at start, push at retirement, back-to-back starts), the compute
// pipeline (one micro-op per cycle, four stages, deferred pushes, drain before LOAD/FINISH) and
// the busy/stall counters of hw/rtl computed per interval.  The memory system -- fetch, the
// five read clients' DMA engines (burst requester, unpacker, pad writer), the round-robin read
// arbiter with `mem_inflight` requests in flight, the register slices, the DRAM model of
// harness.cpp (latency, shared bandwidth credit, read/write alternation) and the store DMA --
// is one process stepped cycle by cycle, but only through the cycles where something moves:
// waits for DRAM latency, tokens or compute are skipped in one jump, and a long streaming read
// (one client, whole-beat elements, no writes) is advanced burst by burst in closed form.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

namespace timing {

typedef int64_t T;
const T NEVER = INT64_MAX / 4;

// Fields of one instruction row (sim/timing/decode.py builds them).
enum Field { F_MODULE, F_KIND, F_POPS, F_PUSHES, F_CLIENT, F_ELEM_BYTES, F_DRAM_BASE, F_Y, F_X,
             F_STRIDE, F_YP0, F_YP1, F_XP0, F_XP1, F_UOPS, F_GEMM_ACC, N_FIELDS };
enum Kind { K_NOP, K_DMA, K_LOOP, K_FINISH };
enum ModuleId { M_LOAD, M_COMPUTE, M_STORE };
enum Param { P_BUS_BYTES, P_MAX_BURST, P_INFLIGHT, P_LATENCY, P_BPC, P_QUEUE_DEPTH, P_TOKEN_MAX,
             P_INSN_ADDR, P_INSN_COUNT, P_OUT_ELEM_BYTES, P_TRACE, P_MAX_CYCLES, P_FAST,
             P_BOUNDARY, N_PARAMS };
enum Status { S_DONE, S_DEADLOCK, S_CYCLE_LIMIT, S_FINISH_EARLY };
enum Result { R_STATUS, R_CYCLES, R_BUSY0, R_STALL0 = R_BUSY0 + 3, R_GEMM_BUSY = R_STALL0 + 3,
              R_HEAD0, R_WAIT0 = R_HEAD0 + 3, R_TOKENS0 = R_WAIT0 + 3, R_READ_BEATS = R_TOKENS0 + 4,
              R_WRITE_BEATS, N_RESULTS };
// Queues: 0 l2c, 1 c2l, 2 c2s, 3 s2c; producer and consumer of each.
const int PRODUCER[4] = {M_LOAD, M_COMPUTE, M_COMPUTE, M_STORE};
const int CONSUMER[4] = {M_COMPUTE, M_LOAD, M_STORE, M_COMPUTE};
// Trace records: (kind, a, b, c) quadruples.
enum TraceKind { TR_BUSY, TR_GEMM, TR_READ, TR_WRITE, TR_TOKEN };

struct Tracer {
    bool on = false;
    std::vector<T> out;
    void add(T kind, T a, T b, T c) {
        if (!on) return;
        out.push_back(kind);
        out.push_back(a);
        out.push_back(b);
        out.push_back(c);
    }
};

// A union of intervals added in order of their starts: cycles counted once.  In the trace a
// cycle covered twice belongs to the later interval (the instruction that started last), as
// the rtl trace labels it.
struct Cover {
    T until = 0, total = 0;
    size_t last = SIZE_MAX;  // the trace record of the latest interval
    void add(T a, T b, Tracer& tr, T kind, T who, T label) {
        if (b <= until) return;
        T tag = who * (T(1) << 32) + label;
        total += b - std::max(a, until);
        if (tr.on) {
            if (a <= until && last != SIZE_MAX && tr.out[last + 3] == tag) {  // one piece
                tr.out[last + 2] = b;
                until = b;
                return;
            }
            if (a < until && last != SIZE_MAX)
                tr.out[last + 2] = std::max(tr.out[last + 1], a);  // hand the overlap over
            else
                a = std::max(a, until);
            last = tr.out.size();
            tr.add(kind, a, b, tag);
        }
        until = b;
    }
};

template <class X, int N>
struct Ring {  // a small FIFO
    X v[N];
    int head = 0, n = 0;
    bool empty() const { return n == 0; }
    bool full() const { return n == N; }
    X& front() { return v[head]; }
    X& back() { return v[(head + n - 1) % N]; }
    void push(const X& x) { v[(head + n++) % N] = x; }
    void pop() { head = (head + 1) % N; --n; }
    void clear() { head = n = 0; }
};

struct Tokens {
    std::vector<T> visible;  // cycle from which each push counts, in push order
    T pops = 0;
    std::vector<T> pop_at;  // cycle each pop takes effect
    T count_at(T t) const {  // pushes visible at t minus pops effective at t
        T pushed = std::upper_bound(visible.begin(), visible.end(), t) - visible.begin();
        T popped = std::upper_bound(pop_at.begin(), pop_at.end(), t) - pop_at.begin();
        return pushed - popped;
    }
};

// ---- the read side: one DMA engine per client ------------------------------------------------
struct ReadDma {
    bool active = false;
    int module = -1, insn = -1;
    T eb = 0, base = 0, y = 0, x = 0, stride = 0, yp0 = 0, yp1 = 0, xp0 = 0, xp1 = 0;
    // burst requester
    T req_row = 0, req_word = 0, req_left = 0, req_time = NEVER;
    // pad writer + unpacker
    T wy = 0, wx = 0, rows = 0, row_len = 0, wnext = 0, row_elem = 0;
    int gather = 0;
    T full_at = NEVER;
};

struct Beat {
    int client;
    bool last;
    T visible;
};

struct Burst {
    int client;
    T beats, sent, ready;
};

struct Module {
    int id;
    std::vector<int> insns;  // program indices, in order
    std::vector<T> arrive;  // cycle each becomes visible in the command queue
    std::vector<T> starts;
    size_t head = 0;
    T next = NEVER;
    int state = 0;  // 0 WAIT, 1 EXEC (DMA), 2 RETIRE
    T free_at = 0, retire_at = NEVER, start_at = 0, wait_from = -1;
    T done_at = NEVER;  // DMA completion (first cycle `done`)
    Cover busy;
    T stall = 0;
    // compute only
    T pipe_lo = -1, pipe_hi = -1;  // last loop instruction's pipeline activity [lo, hi)
    T drain_at = 0;  // cycle from which LOAD/NOP/FINISH may start (pipeline and pushes done)
    int waiting_on = -1;  // queue it waits on (for the deadlock report), 4: queue room
};

struct Model {
    const T* f;  // instruction fields
    T n_insns;
    const T* p;
    T bus, max_burst, inflight, latency, bpc, depth, token_max, out_eb;
    T page_words;  // bus words between two 4 KiB boundaries (hw.config.BURST_BOUNDARY_BYTES)
    bool fast;
    Tracer tr;
    Module mod[3];
    Tokens tok[4];
    Cover gemm;
    T gemm_tail = -1, gemm_tail_insn = 0;
    T finish_cycles = -1;
    int status = S_DONE;
    T read_beats = 0, write_beats = 0;
    // memory process
    T now = 0;  // next cycle to simulate
    T horizon = NEVER;
    T credit = 0, credit_cycle = -1;  // DRAM bandwidth credit after cycle credit_cycle
    bool write_turn = false;
    Ring<Burst, 128> rq;  // DRAM read queue
    Ring<Beat, 2> rslice;
    int ids = 0;  // read bursts in flight (arbiter's id FIFO)
    int rr_last = 4;
    ReadDma rd[5];  // 0 fetch (handled apart), 1 inp, 2 wgt, 3 uop, 4 acc
    // fetch
    T f_req_word = 0, f_req_left = 0, f_req_time = NEVER, f_requested = 0;
    std::vector<T> f_take;  // cycle each fetched beat left the beat FIFO
    Ring<T, 64> f_fifo;  // visible cycle of beats in the beat FIFO
    T f_buffer = 0, f_burst = 0, f_per_insn_beats = 1, f_per_beat = 1, f_pos = 0;
    int f_gather = 0;
    T f_full_at = NEVER, f_routed = 0, f_first = 0;
    // store DMA
    struct {
        bool active = false;
        int insn = -1;
        T base = 0, y = 0, x = 0, stride = 0;
        T req_row = 0, req_word = 0, req_left = 0, req_time = NEVER;
        int ahead = 0;
        Ring<T, 4> lens;  // beats of the bursts whose AW is accepted, W beats not all sent
        Ring<T, 2> aw_slice;  // visible cycles
        T rd_issued = 0, rd_total = 0, rd_x = 0, rd_row_elem = 0;
        bool in_flight = false;
        T in_flight_idx = 0;
        bool in_flight_row_last = false;
        struct E { T visible, idx; bool row_last; };
        Ring<E, 4> fifo;
        bool ob_valid = false, ob_row_end = false;
        T left = 0;
        bool split_row_last = false;
        T beat_no = 0;
        struct W { T visible; bool last; };
        Ring<W, 2> w_slice;
    } st;
    Ring<Burst, 128> wq;  // DRAM write queue
    std::vector<Burst> wq_pending;  // AWs in the AW slice, accepted by DRAM at `ready`
    T store_start = 0;  // the current STORE's start cycle
    T routed_per[3] = {0, 0, 0};  // instructions fetch routed to each module
    int ids_freed = 0;  // id slots freed this cycle
    std::vector<T> frees;  // the fast paths' outstanding bursts: free cycles
    void init(const T* fields, T n, const T* params);
    // Beats of the burst a requester asks for at bus word `word` with `left` words of its row
    // to go: at most `cap`, and never across a 4 KiB boundary (BurstRequester in hw/rtl/dma.py).
    T burst_beats(T word, T left, T cap) const {
        return std::min({left, cap, page_words - (word & (page_words - 1))});
    }
    T fi(T i, int field) const { return f[i * N_FIELDS + field]; }

    // ---- fetch ----------------------------------------------------------------------------
    void init_fetch();
    // level + pending + beats <= buffer, level + pending = requested - taken (before c)
    bool fetch_may_request(T c) { return fetch_request_time(c) <= c; }
    // What fetch waits for, recomputed only when its state (or a module's starts) changed:
    // when its next burst may be requested, when its command queue has room for the next
    // instruction, whether it holds data.
    struct FetchView {
        T version = -1, request_at = NEVER, room_at = NEVER;
        bool has_data = false, can_gather = false;
    } f_view;
    T f_version = 0;
    const FetchView& fetch_view() { return f_view.version == f_version ? f_view : refresh_fetch(); }
    const FetchView& refresh_fetch();
    void route(T c);
    // One cycle of fetch's data path.
    void fetch_cycle(T c);
    // Whether fetch's data path can move in cycle c (a beat to take or an instruction to route).
    bool fetch_busy(T c) {
        const FetchView& v = fetch_view();
        return v.has_data && (v.can_gather || v.room_at <= c);
    }
    // Earliest cycle >= c at which fetch may act while it is not busy: request a burst, or
    // route an instruction into room that a module start has already made.
    T fetch_wake(T c) {
        const FetchView& v = fetch_view();
        return std::max(c, std::min(v.request_at, v.has_data ? v.room_at : NEVER));
    }
    // Earliest cycle >= c at which fetch may request a burst (NEVER while it waits for room).
    T fetch_request_time(T c) {
        T t = fetch_view().request_at;
        return t >= NEVER ? NEVER : std::max(t, c);
    }

    // ---- read DMAs -------------------------------------------------------------------------
    void start_read(int client, int module, int insn, T s);
    void set_row(ReadDma& d);
    void finish_read(ReadDma& d, T last_write);
    bool is_data(const ReadDma& d) const;
    void advance_writer(ReadDma& d, T c);
    // The client's side of cycle c: pad writes, and taking the head beat of the R slice.
    // Returns whether the head beat was accepted.
    bool client_cycle(ReadDma& d, T c, bool head);

    // ---- the memory process ----------------------------------------------------------------
    bool read_requesting(int k, T c);
    void grant(int k, T c);
    void arbiter(T c, int ids_now);
    // The store DMA's cycle c.
    void store_cycle(T c, bool w_accepted);
    void store_row();
    bool store_drained() const;
    void start_store(int insn, T s0);
    // One cycle of the whole memory system.
    void cycle(T c);
    void take_beat();
    bool memory_active() { return quiet_until(now) < NEVER; }
    // Earliest cycle >= c at which the memory system may do something; NEVER when it waits
    // only on the modules (which then wake it).
    T quiet_until(T c);

    // ---- the fast path: one client streaming whole-beat elements, nothing else moving --------
    // Every beat is then taken the cycle after the DRAM offers it, offers follow each other
    // as soon as a burst is ready, and grants wait only for the requester and for a free id
    // slot; so bursts are computed whole (offers, takes, element writes in closed form) instead
    // of cycle by cycle.  The per-cycle state is rebuilt exactly where the fast path stops.
    int streaming_client(T c);
    // Beats taken at cycles t1 .. t1 + count - 1 by client d (whole-beat elements, no padding).
    void stream_takes(ReadDma& d, T t1, T count);
    void advance_elems(ReadDma& d, T n, T last_write);
    // A whole element waiting in the gather is written at full_at when no beat comes then.
    void flush_gather(ReadDma& d, T before);
    // Runs the memory system from `now` with client k alone, until `stop` or the horizon.
    void stream(int k, T stop);

    // ---- the general fast path: one client, any element size, padding -----------------------
    // The same regime as `stream`, but the client may stall the R channel (padding, elements
    // narrower than a beat): each beat is offered when the DRAM may (ready, one per cycle, the
    // R slice holding at most two), taken when the client may, and the pad writer advances in
    // runs; the per-cycle state is rebuilt exactly at the stop, as in `stream`.
    void chain(int k);
    // Rebuilds the per-cycle memory state where `stream` or `chain` stops at `end`.
    void leave_fast(T end, T last_o, T offers);
    struct Pend {  // a beat offered and not yet taken
        T o;
        int client;
        bool last;
    };
    // Pad writes from the writer's position to its next data element (or to the end).
    T pads_ahead(const ReadDma& d) const;
    // The writer moves n positions.
    void advance_pos(ReadDma& d, T n);
    // The cycle the writer reaches its next data element (after the padding before it).
    T data_slot(const ReadDma& d) const { return d.wnext + pads_ahead(d); }
    void pads_until(ReadDma& d, T lim);
    void data_writes(ReadDma& d, T first, T n);
    // Elements of the next data element's beat that the writer takes from it (narrow elements:
    // up to the beat's last position or the row's end).
    T beat_elems(const ReadDma& d, T sub, T pads) const;  // pads: pads_ahead(d)

    // The memory process from `now` up to `limit` (or until a module must act first).
    void advance_memory(T limit);

    // ---- modules ----------------------------------------------------------------------------
    void wake(int m, T t);
    bool pops_ready(T insn, T t, T* when, int* queue);
    void pop_tokens(T insn, T s);
    void push_tokens(T mask, T visible);
    bool room_for(T mask, T t);
    // Run module m's events at its `next` cycle.
    void step(int m);
    void start(Module& md, T insn, T s, T ready);
    void retire(Module& md, T t);
    int run();
    void results(T* r);
};

}  // namespace timing
