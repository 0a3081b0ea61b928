// The `timing` backend's cycle-level model of hw/rtl (see sim/timing/__init__.py), called through
// ctypes.  It computes no tensor values: instructions arrive as rows of pre-decoded fields.
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
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

namespace {

typedef int64_t T;
const T NEVER = INT64_MAX / 4;

// Fields of one instruction row (sim/timing/decode.py builds them).
enum Field { F_MODULE, F_KIND, F_POPS, F_PUSHES, F_CLIENT, F_ELEM_BYTES, F_DRAM_BASE, F_Y, F_X,
             F_STRIDE, F_YP0, F_YP1, F_XP0, F_XP1, F_UOPS, F_GEMM_ACC, N_FIELDS };
enum Kind { K_NOP, K_DMA, K_LOOP, K_FINISH };
enum ModuleId { M_LOAD, M_COMPUTE, M_STORE };
enum Param { P_BUS_BYTES, P_MAX_BURST, P_INFLIGHT, P_LATENCY, P_BPC, P_QUEUE_DEPTH, P_TOKEN_MAX,
             P_INSN_ADDR, P_INSN_COUNT, P_OUT_ELEM_BYTES, P_TRACE, P_MAX_CYCLES, P_FAST,
             N_PARAMS };
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
    size_t seen = 0;  // starts before `seen_at` (see Model::started_before)
    T seen_at = 0;
};

struct Model {
    const T* f;  // instruction fields
    T n_insns;
    const T* p;
    T bus, max_burst, inflight, latency, bpc, depth, token_max, out_eb;
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
    T f_req_word = 0, f_req_left = 0, f_req_time = NEVER, f_requested = 0, f_taken = 0;
    std::vector<T> f_take;  // cycle each fetched beat left the beat FIFO
    Ring<T, 64> f_fifo;  // visible cycle of beats in the beat FIFO
    T f_buffer = 0, f_burst = 0, f_per_insn_beats = 1, f_per_beat = 1, f_pos = 0;
    int f_gather = 0;
    T f_full_at = NEVER, f_routed = 0, f_first = 0;
    std::vector<T> f_queue_starts_seen;
    // store DMA
    struct {
        bool active = false;
        int insn = -1;
        T base = 0, y = 0, x = 0, stride = 0;
        T req_row = 0, req_word = 0, req_left = 0, req_time = NEVER;
        int ahead = 0;
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

    void init(const T* fields, T n, const T* params) {
        f = fields;
        n_insns = n;
        p = params;
        bus = p[P_BUS_BYTES];
        max_burst = p[P_MAX_BURST];
        inflight = p[P_INFLIGHT];
        latency = p[P_LATENCY];
        bpc = p[P_BPC];
        depth = p[P_QUEUE_DEPTH];
        token_max = p[P_TOKEN_MAX];
        out_eb = p[P_OUT_ELEM_BYTES];
        fast = p[P_FAST] != 0;
        tr.on = p[P_TRACE] != 0;
        // the DRAM model's credit accumulates from the harness's first cycle, two before the
        // first counted one (reset and start)
        credit = std::min(std::max(bpc, bus), 2 * bpc);
        for (int m = 0; m < 3; ++m) mod[m].id = m;
        for (T i = 0; i < n; ++i) {
            Module& m = mod[fi(i, F_MODULE)];
            m.insns.push_back(int(i));
            m.arrive.push_back(NEVER);
        }
        init_fetch();
    }

    T fi(T i, int field) const { return f[i * N_FIELDS + field]; }

    // ---- fetch ----------------------------------------------------------------------------
    void init_fetch() {
        f_burst = std::min<T>(max_burst, 16);
        f_buffer = 2 * f_burst;
        f_per_insn_beats = std::max<T>(1, 16 / bus);
        f_per_beat = std::max<T>(1, bus / 16);
        T start_byte = p[P_INSN_ADDR], end_byte = start_byte + 16 * n_insns - 1;
        f_req_word = start_byte / bus;
        f_req_left = n_insns ? end_byte / bus - start_byte / bus + 1 : 0;
        f_req_time = n_insns ? 2 : NEVER;  // go at 0, SETUP at 1, BURST from 2
        f_first = start_byte / 16;
        f_pos = f_first % f_per_beat;
    }

    // level + pending + beats <= buffer, level + pending = requested - taken (before c)
    bool fetch_may_request(T c) { return fetch_request_time(c) <= c; }

    bool queue_room_at(int m, T c) {  // whether module m's command queue takes a write at c
        return routed_per[m] - started_before(mod[m], c) < depth;  // routed: all before c
    }

    // Instructions module md started before cycle c (queries come in nondecreasing c, and
    // starts are recorded before the memory process simulates their cycle).
    T started_before(Module& md, T c) {
        if (c < md.seen_at) {
            return std::lower_bound(md.starts.begin(), md.starts.end(), c) - md.starts.begin();
        }
        md.seen_at = c;
        while (md.seen < md.starts.size() && md.starts[md.seen] < c) ++md.seen;
        return T(md.seen);
    }
    T routed_per[3] = {0, 0, 0};

    void route(T c) {  // one instruction into its command queue at cycle c
        T i = f_routed++;
        int m = int(fi(i, F_MODULE));
        Module& md = mod[m];
        md.arrive[routed_per[m]++] = c + 1;
        if (T(md.head) + 1 == routed_per[m]) wake(m, c + 1);
    }

    // one cycle of fetch's data path; `beat_in` when a fetched beat entered the FIFO this cycle
    void fetch_cycle(T c) {
        if (f_routed >= n_insns) return;
        int m = int(fi(f_routed, F_MODULE));
        bool room = queue_room_at(m, c);
        if (f_per_insn_beats > 1) {  // gather several beats per instruction
            bool full = f_gather == f_per_insn_beats && f_full_at <= c;
            bool taken = full && room;
            if (taken) route(c);
            bool head = !f_fifo.empty() && f_fifo.front() <= c;
            if (head && (f_gather < f_per_insn_beats || taken)) {
                f_fifo.pop();
                f_take.push_back(c);
                f_gather = taken ? 1 : f_gather + 1;
                if (f_gather == f_per_insn_beats) f_full_at = c + 1;
            } else if (taken) {
                f_gather = 0;
            }
        } else {
            bool head = !f_fifo.empty() && f_fifo.front() <= c;
            if (head && room) {
                route(c);
                ++f_pos;
                if (f_pos == f_per_beat || f_routed == n_insns) {
                    f_pos = 0;
                    f_fifo.pop();
                    f_take.push_back(c);
                }
            }
        }
    }

    // Whether fetch's data path can move in cycle c (a beat to take or an instruction to route).
    bool fetch_busy(T c) {
        if (f_routed >= n_insns || (f_fifo.empty() && f_gather == 0)) return false;
        if (f_per_insn_beats > 1 && f_gather < f_per_insn_beats && !f_fifo.empty()) return true;
        return queue_room_at(int(fi(f_routed, F_MODULE)), c);
    }

    // Earliest cycle >= c at which fetch may act while it is not busy: request a burst, or
    // route an instruction into room that a module start has already made.
    T fetch_wake(T c) {
        T t = fetch_request_time(c);
        if (f_routed < n_insns && (!f_fifo.empty() || f_gather > 0)) {  // waits for queue room
            Module& md = mod[fi(f_routed, F_MODULE)];
            T idx = routed_per[md.id] - depth;  // the entry whose start makes room
            if (idx < T(md.starts.size())) t = std::min(t, idx < 0 ? c : md.starts[idx] + 1);
        }
        return std::max(t, c);
    }

    // Earliest cycle >= c at which fetch may request a burst (NEVER while it waits for room).
    T fetch_request_time(T c) {
        if (f_req_left == 0) return NEVER;
        T beats = std::min(f_req_left, f_burst);
        T need = f_requested + beats - f_buffer;
        T t = std::max(f_req_time, c);
        if (need <= 0) return t;
        if (need > T(f_take.size())) return NEVER;
        return std::max(t, f_take[need - 1] + 1);
    }

    // ---- read DMAs -------------------------------------------------------------------------
    void start_read(int client, int module, int insn, T s) {
        ReadDma& d = rd[client];
        d = ReadDma();
        d.active = true;
        d.module = module;
        d.insn = insn;
        d.eb = fi(insn, F_ELEM_BYTES);
        d.base = fi(insn, F_DRAM_BASE);
        d.y = fi(insn, F_Y);
        d.x = fi(insn, F_X);
        d.stride = fi(insn, F_STRIDE);
        d.yp0 = fi(insn, F_YP0);
        d.yp1 = fi(insn, F_YP1);
        d.xp0 = fi(insn, F_XP0);
        d.xp1 = fi(insn, F_XP1);
        d.rows = d.yp0 + d.y + d.yp1;
        d.row_len = d.xp0 + d.x + d.xp1;
        d.wnext = s + 1;
        d.row_elem = d.base;
        d.req_row = 0;
        d.req_time = s + 2;
        set_row(d);
        if (d.rows == 0 || d.row_len == 0) finish_read(d, s);
        if (now > s + 1) now = s + 1;
    }

    void set_row(ReadDma& d) {
        T start = (d.base + d.req_row * d.stride) * d.eb, end = start + d.x * d.eb - 1;
        d.req_word = start / bus;
        d.req_left = end / bus - start / bus + 1;
    }

    void finish_read(ReadDma& d, T last_write) {
        d.active = false;
        Module& m = mod[d.module];
        m.done_at = last_write + 1;
        wake(d.module, last_write + 1);
    }

    bool is_data(const ReadDma& d) const {
        return d.wy >= d.yp0 && d.wy < d.yp0 + d.y && d.wx >= d.xp0 && d.wx < d.xp0 + d.x;
    }

    void advance_writer(ReadDma& d, T c) {
        d.wnext = c + 1;
        bool data_row = d.wy >= d.yp0 && d.wy < d.yp0 + d.y;
        if (++d.wx == d.row_len) {
            d.wx = 0;
            if (data_row) d.row_elem += d.stride;
            if (++d.wy == d.rows) finish_read(d, c);
        }
    }

    // The client's side of cycle c: pad writes, and taking the head beat of the R slice.
    // Returns whether the head beat was accepted.
    bool client_cycle(ReadDma& d, T c, bool head) {
        if (!d.active || d.wnext > c) return false;
        if (!is_data(d)) {  // padding: a zero per cycle, no data needed
            advance_writer(d, c);
            if (d.eb > bus && head && d.gather < d.eb / bus) {  // the gather fills meanwhile
                if (++d.gather == d.eb / bus) d.full_at = c + 1;
                return true;
            }
            return false;
        }
        if (d.eb > bus) {  // several beats per element
            T per = d.eb / bus;
            bool taken = d.gather == per && d.full_at <= c;
            if (taken) advance_writer(d, c);
            bool accept = head && (d.gather < per || taken);
            if (accept) {
                d.gather = taken ? 1 : d.gather + 1;
                if (d.gather == per) d.full_at = c + 1;
            } else if (taken) {
                d.gather = 0;
            }
            return accept;
        }
        if (!head) return false;
        if (d.eb == bus) {
            advance_writer(d, c);
            return true;
        }
        // sub-word: the beat is released after its last element or the row's last
        T per = bus / d.eb;
        T idx = (d.row_elem + d.wx - d.xp0) % per;
        bool row_last = d.wx == d.xp0 + d.x - 1;
        advance_writer(d, c);
        return idx == per - 1 || row_last;
    }

    // ---- the memory process ----------------------------------------------------------------
    bool read_requesting(int k, T c) {
        if (k == 0) return fetch_may_request(c);
        const ReadDma& d = rd[k];
        return d.active && d.req_time <= c && d.req_row < d.y;
    }

    void grant(int k, T c) {
        T beats;
        if (k == 0) {
            beats = std::min(f_req_left, f_burst);
            f_req_left -= beats;
            f_req_word += beats;
            f_requested += beats;
            f_req_time = c + 1;
        } else {
            ReadDma& d = rd[k];
            beats = std::min(d.req_left, max_burst);
            d.req_left -= beats;
            d.req_word += beats;
            d.req_time = c + 1;
            if (d.req_left == 0) {
                ++d.req_row;
                d.req_time = c + 2;  // SETUP
                if (d.req_row < d.y) set_row(d);
            }
        }
        rq.push(Burst{k, beats, 0, c + 1 + latency});
        ++ids;
        rr_last = k;
    }

    void arbiter(T c, int ids_now) {
        if (ids_now >= inflight) return;
        for (int step = 1; step <= 5; ++step) {
            int k = (rr_last + step) % 5;
            if (read_requesting(k, c)) {
                grant(k, c);
                return;
            }
        }
    }

    // The store DMA's cycle c.
    void store_cycle(T c, bool w_accepted) {
        auto& s = st;
        if (!s.active) return;
        bool slice_full = s.w_slice.full();  // its level before this cycle's pop (SyncFIFO)
        if (w_accepted) s.w_slice.pop();
        // packer output into the W slice
        bool fire = s.ob_valid && s.ahead != 0 && !slice_full;
        int ahead_next = s.ahead;
        bool ob_next = s.ob_valid && !fire;
        if (fire) {
            bool last = s.ob_row_end || s.beat_no == max_burst - 1;
            s.w_slice.push({c + 1, last});
            s.beat_no = last ? 0 : s.beat_no + 1;
            if (last) --ahead_next;
        }
        bool ob_free = !s.ob_valid || fire;
        int level0 = s.fifo.n;  // the RTL's FIFO level: pops of this cycle count from the next
        // packer input
        bool head = !s.fifo.empty() && s.fifo.front().visible <= c;
        if (out_eb == bus) {
            if (head && ob_free) {
                s.ob_row_end = s.fifo.front().row_last;
                ob_next = true;
                s.fifo.pop();
            }
        } else if (out_eb < bus) {
            if (head) {
                T per = bus / out_eb;
                bool flush = s.fifo.front().idx % per == per - 1 || s.fifo.front().row_last;
                if (!flush || ob_free) {
                    if (flush) {  // the merged beat goes to the output register
                        s.ob_row_end = s.fifo.front().row_last;
                        ob_next = true;
                    }
                    s.fifo.pop();
                }
            }
        } else {
            T per = out_eb / bus;
            bool take = head && (s.left == 0 || (s.left == 1 && ob_free));
            if (s.left != 0 && ob_free) {
                s.ob_row_end = s.left == 1 && s.split_row_last;
                ob_next = true;
                --s.left;
            }
            if (take) {
                s.split_row_last = s.fifo.front().row_last;
                s.left = per;
                s.fifo.pop();
            }
        }
        s.ob_valid = ob_next;
        // out reader: one SRAM read per cycle into a 4-entry FIFO behind a 1-cycle read
        bool write_fifo = s.in_flight;
        bool issue = s.rd_issued < s.rd_total && c > store_start &&
                     level0 + (write_fifo ? 1 : 0) < 4;
        if (write_fifo) s.fifo.push({c + 1, s.in_flight_idx, s.in_flight_row_last});
        s.in_flight = issue;
        if (issue) {
            s.in_flight_idx = s.rd_row_elem + s.rd_x;
            s.in_flight_row_last = s.rd_x == s.x - 1;
            ++s.rd_issued;
            if (++s.rd_x == s.x) {
                s.rd_x = 0;
                s.rd_row_elem += s.stride;
            }
        }
        // AW requester
        if (s.req_row < s.y && s.req_time <= c && s.ahead < 4) {
            T beats = std::min(s.req_left, max_burst);
            s.req_left -= beats;
            s.aw_slice.push(c + 1);
            wq_pending.push_back(Burst{-1, beats, 0, c + 1});
            ++ahead_next;
            s.req_time = c + 1;
            if (s.req_left == 0) {
                ++s.req_row;
                s.req_time = c + 2;
                if (s.req_row < s.y) store_row();
            }
        }
        s.ahead = ahead_next;
    }
    std::vector<Burst> wq_pending;  // AWs in the AW slice, accepted by DRAM at `ready`

    void store_row() {
        auto& s = st;
        T start = (s.base + s.req_row * s.stride) * out_eb, end = start + s.x * out_eb - 1;
        s.req_word = start / bus;
        s.req_left = end / bus - start / bus + 1;
    }

    bool store_drained() const {
        const auto& s = st;
        return s.req_row >= s.y && s.rd_issued == s.rd_total && !s.in_flight && s.fifo.empty() &&
               !s.ob_valid && s.left == 0 && s.ahead == 0 && s.w_slice.empty() &&
               wq_pending.empty();
    }

    void start_store(int insn, T s0) {
        auto& s = st;
        s.active = true;
        s.insn = insn;
        s.base = fi(insn, F_DRAM_BASE);
        s.y = fi(insn, F_Y);
        s.x = fi(insn, F_X);
        s.stride = fi(insn, F_STRIDE);
        s.req_row = 0;
        s.req_time = s0 + 2;
        store_row();
        s.ahead = 0;
        s.rd_issued = 0;
        s.rd_total = s.x * s.y;
        s.rd_x = 0;
        s.rd_row_elem = s.base;
        s.in_flight = false;
        s.fifo.clear();
        s.ob_valid = false;
        s.left = 0;
        s.beat_no = 0;
        s.w_slice.clear();
        store_start = s0;
        if (now > s0 + 1) now = s0 + 1;
    }
    T store_start = 0;

    // One cycle of the whole memory system.
    void cycle(T c) {
        T cap = std::max(bpc, bus);  // credit accumulates every cycle, skipped ones included
        credit = std::min(cap, credit + bpc * std::min(c - credit_cycle, cap));
        credit_cycle = c;
        bool read_ready = !rq.empty() && rq.front().ready <= c;
        bool write_work = !wq.empty();
        bool r_offer, w_offer;
        if (write_work && (write_turn || !read_ready)) {
            w_offer = credit >= bus;
            r_offer = read_ready && credit >= bus * (1 + w_offer);
        } else {
            r_offer = read_ready && credit >= bus;
            w_offer = credit >= bus * (1 + r_offer);
        }
        int slice_level = rslice.n;
        int ids_now = ids;
        // clients take the head beat of the R slice (entered before this cycle)
        bool head = !rslice.empty() && rslice.front().visible <= c;
        int head_client = head ? rslice.front().client : -1;
        for (int k = 1; k < 5; ++k) {
            ReadDma& d = rd[k];
            if (!d.active) continue;
            if (client_cycle(d, c, head_client == k)) take_beat();
        }
        if (head_client == 0) {  // fetch: the beat FIFO always has room (credits)
            f_fifo.push(c + 1);
            take_beat();
        }
        fetch_cycle(c);
        // DRAM: a read beat into the R slice
        if (r_offer && slice_level < 2) {
            Burst& b = rq.front();
            ++b.sent;
            bool last = b.sent == b.beats;
            rslice.push(Beat{b.client, last, c + 1});
            tr.add(TR_READ, c, c + 1, b.client);
            credit -= bus;
            write_turn = true;
            ++read_beats;
            if (last) rq.pop();
        }
        // DRAM: AW accepted from the AW slice (before the W beat, as the harness does)
        if (!wq_pending.empty() && wq_pending.front().ready <= c) {
            wq.push(wq_pending.front());
            wq_pending.erase(wq_pending.begin());
            st.aw_slice.pop();
        }
        bool w_accepted = false;
        if (w_offer && !st.w_slice.empty() && st.w_slice.front().visible <= c && !wq.empty()) {
            w_accepted = true;
            credit -= bus;
            write_turn = false;
            ++write_beats;
            tr.add(TR_WRITE, c, c + 1, 0);
            Burst& w = wq.front();
            if (++w.sent == w.beats) wq.pop();
        }
        store_cycle(c, w_accepted);
        if (st.active && store_drained()) {
            st.active = false;
            mod[M_STORE].done_at = c + 1;
            wake(M_STORE, c + 1);
        }
        arbiter(c, ids_now);
        ids -= ids_freed;  // id slots freed by last beats taken this cycle count from the next
        ids_freed = 0;
    }
    int ids_freed = 0;

    void take_beat() {
        Beat b = rslice.front();
        rslice.pop();
        if (b.last) ++ids_freed;
    }

    bool memory_active() { return quiet_until(now) < NEVER; }

    // Earliest cycle >= c at which the memory system may do something; NEVER when it waits
    // only on the modules (which then wake it).
    T quiet_until(T c) {
        if (!rslice.empty() || st.active || !wq.empty() || fetch_busy(c)) return c;
        T t = fetch_wake(c);
        if (!rq.empty()) t = std::min(t, rq.front().ready);
        for (int k = 1; k < 5; ++k) {
            const ReadDma& d = rd[k];
            if (!d.active) continue;
            if (!is_data(d)) return c;  // padding writes
            if (d.req_row < d.y) t = std::min(t, std::max(d.req_time, c));
            if (d.gather == d.eb / bus && d.eb > bus) return c;
        }
        return std::max(t, c);
    }

    // ---- the fast path: one client streaming whole-beat elements, nothing else moving --------
    // Every beat is then taken the cycle after the DRAM offers it, offers follow each other
    // as soon as a burst is ready, and grants wait only for the requester and for a free id
    // slot; so bursts are computed whole (offers, takes, element writes in closed form) instead
    // of cycle by cycle.  The per-cycle state is rebuilt exactly where the fast path stops.
    int streaming_client(T c) {
        if (!fast || bpc < bus || st.active || !wq.empty() || !wq_pending.empty()) return 0;
        if (fetch_busy(c) || fetch_wake(c) <= c + 1) return 0;
        int k = 0;
        for (int i = 1; i < 5; ++i) {
            if (!rd[i].active) continue;
            if (k) return 0;
            k = i;
        }
        if (!k) return 0;
        const ReadDma& d = rd[k];
        for (int i = 0; i < rq.n; ++i)
            if (rq.v[(rq.head + i) % 128].client != k) return 0;
        int lasts = 0;
        for (int i = 0; i < rslice.n; ++i) {
            const Beat& b = rslice.v[(rslice.head + i) % 2];
            if (b.client != k) return 0;
            lasts += b.last;
        }
        if (ids != rq.n + lasts) return 0;
        // whole beats, no padding: whole bursts in closed form (a few cycles apart stepped)
        if (d.eb >= bus && !d.yp0 && !d.yp1 && !d.xp0 && !d.xp1) {
            bool steady = d.wnext <= c && !(d.gather == d.eb / bus && d.eb > bus && d.full_at < c) &&
                          rslice.n <= 1 && (rslice.empty() || rslice.front().visible <= c);
            return steady ? k : 0;
        }
        return -k;  // padding or narrow elements: beat by beat
    }

    // Beats taken at cycles t1 .. t1 + count - 1 by client d (whole-beat elements, no padding).
    void stream_takes(ReadDma& d, T t1, T count) {
        T per = d.eb / bus;
        if (per == 1) {
            advance_elems(d, count, t1 + count - 1);
            return;
        }
        T g = d.gather;
        T t0 = g == 0 ? per : (per - g) % per;  // first take cycle (offset) that writes
        T writes = t0 < count ? (count - 1 - t0) / per + 1 : 0;
        d.gather = int(g == 0 ? (count - 1) % per + 1 : (g - 1 + count) % per + 1);
        if (writes) advance_elems(d, writes, t1 + t0 + (writes - 1) * per);
        if (d.gather == per) d.full_at = t1 + count;
    }

    void advance_elems(ReadDma& d, T n, T last_write) {
        d.wx += n;
        T rows = d.wx / d.x;
        d.wx %= d.x;
        d.wy += rows;
        d.row_elem += rows * d.stride;
        d.wnext = last_write + 1;
        if (d.wy == d.rows) finish_read(d, last_write);
    }

    // A whole element waiting in the gather is written at full_at when no beat comes then.
    void flush_gather(ReadDma& d, T before) {
        T per = d.eb / bus;
        if (per > 1 && d.active && d.gather == per && d.full_at < before) {
            d.gather = 0;
            advance_elems(d, 1, d.full_at);
        }
    }

    // Runs the memory system from `now` with client k alone, until `stop` or the horizon.
    void stream(int k, T stop) {
        ReadDma& d = rd[k];
        const T c = now;
        stop = std::min(stop, fetch_wake(c));
        // the outstanding bursts' free cycles (take of their last beat + 1), oldest first;
        // NEVER while not yet known
        frees.clear();
        T last_o = c - 1, last_take = NEVER, offers = 0;
        if (!rslice.empty()) {  // the beat in the R slice is taken now
            Beat b = rslice.front();
            rslice.pop();
            if (b.last) frees.push_back(c + 1);
            flush_gather(d, c);
            stream_takes(d, c, 1);
            last_take = c;
        }
        size_t unknown = frees.size();  // the oldest burst whose free cycle is not known
        for (int i = 0; i < rq.n; ++i) frees.push_back(NEVER);
        for (;;) {
            T lim = std::min(stop, horizon);
            T g = NEVER;  // next grant
            bool g_unknown = false;
            if (d.active && d.req_row < d.y) {
                g = std::max(d.req_time, c);
                T out = T(frees.size());
                if (out >= inflight) {  // wait for the oldest id slot among the last `inflight`
                    T f = frees[out - inflight];
                    if (f == NEVER) g_unknown = true;
                    else g = std::max(g, f);
                }
            }
            T o = rq.empty() ? NEVER : std::max(last_o + 1, rq.front().ready);  // next offer
            if (!g_unknown && g <= o && g < lim) {  // (a grant and an offer in one cycle are
                                                     // independent)
                grant(k, g);
                frees.push_back(NEVER);
                continue;
            }
            if (o >= lim) break;
            // the front burst's unsent beats offered from o on (up to lim), taken a cycle later
            Burst& b = rq.front();
            T n = std::min(b.beats - b.sent, lim - o);
            T taken = std::min(n, lim - o - 1);
            if (taken > 0) {
                flush_gather(d, o + 1);
                stream_takes(d, o + 1, taken);
                last_take = o + taken;
            }
            tr.add(TR_READ, o, o + n, k);
            offers += n;
            read_beats += n;
            b.sent += n;
            last_o = o + n - 1;
            bool done = b.sent == b.beats;
            if (done) {
                if (taken == n) frees[unknown++] = last_o + 2;
                rq.pop();
            }
            if (taken < n) rslice.push(Beat{k, done, last_o + 1});  // taken at lim: waits
        }
        T lim = std::min(stop, horizon);
        if (lim >= NEVER) lim = std::max(last_o, last_take) + 2;  // only this DMA was left
        flush_gather(d, lim);
        T end = std::max(c + 1, std::min(lim, horizon));
        ids = 0;
        for (T f : frees)
            if (f > end) ++ids;
        if (offers) write_turn = true;
        T cap = std::max(bpc, bus);
        credit = last_o == end - 1 ? cap - bus : cap;
        credit_cycle = end - 1;
        now = end;
    }
    std::vector<T> frees;

    // ---- the general fast path: one client, any element size, padding -----------------------
    // The same regime as `stream`, but the client may stall the R channel (padding, elements
    // narrower than a beat): each beat is offered when the DRAM may (ready, one per cycle, the
    // R slice holding at most two), taken when the client may, and the pad writer advances in
    // runs; the per-cycle state is rebuilt exactly at the stop, as in `stream`.
    // Pad writes from the writer's position to its next data element (or to the end).
    T pads_ahead(const ReadDma& d) const {
        T y = d.wy, x = d.wx;
        if (d.y == 0 || y >= d.yp0 + d.y) return (d.rows - y) * d.row_len - x;
        if (y < d.yp0) return (d.yp0 - y) * d.row_len - x + d.xp0;
        if (x < d.xp0) return d.xp0 - x;
        if (x < d.xp0 + d.x) return 0;
        if (y + 1 < d.yp0 + d.y) return d.row_len - x + d.xp0;
        return (d.rows - y) * d.row_len - x;
    }

    void advance_pos(ReadDma& d, T n) {  // the writer moves n positions (division-free mostly)
        d.wx += n;
        if (d.wx >= d.row_len) {
            T rows = d.wx / d.row_len;
            d.wx -= rows * d.row_len;
            d.wy += rows;
        }
        d.row_elem = d.base + d.stride * std::min(std::max<T>(d.wy - d.yp0, 0), d.y);
    }

    // The cycle the writer reaches its next data element (after the padding before it).
    T data_slot(const ReadDma& d) const { return d.wnext + pads_ahead(d); }

    void pads_until(ReadDma& d, T lim) {  // padding written before cycle lim
        if (!d.active) return;
        T run = std::min(pads_ahead(d), lim - d.wnext);
        if (run <= 0) return;
        d.wnext += run;
        advance_pos(d, run);
        if (d.wy >= d.rows) finish_read(d, d.wnext - 1);
    }

    void data_writes(ReadDma& d, T first, T n) {  // n data elements at first .. first + n - 1
        pads_until(d, first);
        d.wnext = first + n;
        advance_pos(d, n);
        if (d.wy >= d.rows) finish_read(d, first + n - 1);
    }

    // Elements of the next data element's beat that the writer takes from it (narrow elements:
    // up to the beat's last position or the row's end).
    T beat_elems(const ReadDma& d, T sub) const {
        T row_elem = d.row_elem, col = d.wx - d.xp0;
        if (pads_ahead(d) > 0) {  // the first element of the current row or of a later one
            T row = d.wy < d.yp0 ? 0 : d.wx < d.xp0 ? d.wy - d.yp0 : d.wy - d.yp0 + 1;
            row_elem = d.base + d.stride * row;
            col = 0;
        }
        T idx = (row_elem + col) & (sub - 1);
        return std::min(sub - idx, d.x - col);
    }

    struct Pend {
        T o;
        bool last;
    };

    void chain(int k) {
        ReadDma& d = rd[k];
        const T c = now;
        const T stop = std::min(horizon, fetch_wake(c));
        const T per = d.eb > bus ? d.eb / bus : 1, sub = d.eb < bus ? bus / d.eb : 1;
        Pend pend[2];
        int np = 0;
        T last_o = c - 1, taken1 = c - 1, taken0 = c - 2, offers = 0;  // last two takes
        frees.clear();
        for (int i = 0; i < rslice.n; ++i) {
            const Beat& b = rslice.v[(rslice.head + i) % 2];
            pend[np++] = Pend{b.visible - 1, b.last};
            last_o = b.visible - 1;
            if (b.last) frees.push_back(NEVER);
        }
        rslice.clear();
        for (int i = 0; i < rq.n; ++i) frees.push_back(NEVER);
        size_t unknown = 0;
        T gather_free = c;  // from when the gather takes an element's first beat
        auto lim = [&] { return std::min(stop, horizon); };
        // an element already gathered is written when the writer reaches it
        auto write_full = [&]() {
            if (per > 1 && d.active && d.gather == per) {
                T w = std::max(data_slot(d), d.full_at);
                if (w < lim()) {
                    data_writes(d, w, 1);
                    d.gather = 0;
                    gather_free = w;
                }
            }
        };
        write_full();
        for (;;) {
            // takes, in order, while the client can take them before the stop
            while (np > 0 && d.active) {
                T visible = std::max(pend[0].o + 1, taken1 + 1), a;
                if (per > 1) {
                    if (d.gather == per) break;  // waits for its write
                    a = d.gather == 0 ? std::max(visible, gather_free) : visible;
                    if (a >= lim()) break;
                    if (++d.gather == per) d.full_at = a + 1;
                } else {
                    T first = std::max(visible, data_slot(d));
                    T n = sub > 1 ? beat_elems(d, sub) : 1;
                    a = first + n - 1;
                    if (first >= lim()) break;
                    if (a >= lim()) {  // part of the beat's elements before the stop
                        data_writes(d, first, lim() - first);
                        break;
                    }
                    data_writes(d, first, n);
                }
                taken0 = taken1;
                taken1 = a;
                if (pend[0].last) frees[unknown++] = a + 1;
                pend[0] = pend[1];
                --np;
                write_full();
            }
            T L = lim();
            T g = NEVER;  // next grant
            bool g_unknown = false;
            if (d.active && d.req_row < d.y) {
                g = std::max(d.req_time, c);
                T out = T(frees.size());
                if (out >= inflight) {
                    T f = frees[out - inflight];
                    if (f == NEVER) g_unknown = true;
                    else g = std::max(g, f);
                }
            }
            T o = NEVER;  // next offer: the R slice holds two beats at most
            if (!rq.empty() && np < 2) {
                T before = np == 0 ? taken0 : taken1;  // the take two beats back
                o = std::max({c, last_o + 1, rq.front().ready, before + 1});
            }
            if (!g_unknown && g <= o && g < L) {
                grant(k, g);
                frees.push_back(NEVER);
                continue;
            }
            if (o >= L) break;
            Burst& b = rq.front();
            ++b.sent;
            ++offers;
            ++read_beats;
            tr.add(TR_READ, o, o + 1, k);
            last_o = o;
            bool done = b.sent == b.beats;
            pend[np++] = Pend{o, done};
            if (done) rq.pop();
        }
        T end = std::max(c + 1, lim());
        if (end >= NEVER) end = std::max(last_o, taken1) + 2;  // (the DMA is done)
        if (d.active) {
            pads_until(d, end);
            write_full();
        }
        end = std::max(c + 1, std::min(end, horizon));
        for (int i = 0; i < np; ++i) rslice.push(Beat{k, pend[i].last, pend[i].o + 1});
        ids = 0;
        for (T f : frees)
            if (f > end) ++ids;
        if (offers) write_turn = true;
        T cap = std::max(bpc, bus);
        credit = last_o == end - 1 ? cap - bus : cap;
        credit_cycle = end - 1;
        now = end;
    }

    void advance_memory(T limit) {
        horizon = limit;
        while (now < horizon) {
            if (int k = streaming_client(now)) {
                if (k > 0) stream(k, horizon);
                else chain(-k);
                continue;
            }
            T q = quiet_until(now);
            if (q >= NEVER) return;  // nothing until a module acts
            if (q > now) {  // nothing moves before q: skip, the DRAM credit still accumulates
                now += std::min(q, horizon) - now;
                if (now >= horizon) return;
            }
            cycle(now);
            ++now;
        }
    }

    // ---- modules ----------------------------------------------------------------------------
    void wake(int m, T t) {
        Module& md = mod[m];
        if (t < md.next) md.next = t;
        if (t < horizon) horizon = t;
    }

    bool pops_ready(T insn, T t, T* when, int* queue) {
        T mask = fi(insn, F_POPS);
        bool ok = true;
        *when = t;
        for (int q = 0; q < 4; ++q) {
            if (!(mask >> q & 1)) continue;
            Tokens& k = tok[q];
            if (k.count_at(t) > 0) continue;
            ok = false;
            *queue = q;
            // the next push that would make it positive
            T need = k.pops;  // index of the push this pop consumes
            T at = need < T(k.visible.size()) ? k.visible[need] : NEVER;
            *when = std::max(*when, at);
        }
        return ok;
    }

    void pop_tokens(T insn, T s) {
        T mask = fi(insn, F_POPS);
        for (int q = 0; q < 4; ++q) {
            if (!(mask >> q & 1)) continue;
            tok[q].pops++;
            tok[q].pop_at.push_back(s + 1);
            tr.add(TR_TOKEN, s + 1, q, -1);
            Module& prod = mod[PRODUCER[q]];
            if (prod.state == 2 && prod.waiting_on == 4) wake(PRODUCER[q], s + 1);
        }
    }

    void push_tokens(T mask, T visible) {
        for (int q = 0; q < 4; ++q) {
            if (!(mask >> q & 1)) continue;
            tok[q].visible.push_back(visible);
            tr.add(TR_TOKEN, visible, q, +1);
            wake(CONSUMER[q], visible);
        }
    }

    bool room_for(T mask, T t) {
        for (int q = 0; q < 4; ++q)
            if ((mask >> q & 1) && tok[q].count_at(t) >= token_max) return false;
        return true;
    }

    // Run module m's events at its `next` cycle.
    void step(int m) {
        Module& md = mod[m];
        T t = md.next;
        md.next = NEVER;
        if (md.state == 2) return retire(md, t);
        if (md.state == 1) {  // DMA done
            if (md.done_at <= t) {
                md.state = 2;
                md.retire_at = md.done_at;
                return retire(md, t);
            }
            return;
        }
        if (md.head >= md.insns.size()) return;
        T insn = md.insns[md.head];
        T arrive = md.arrive[md.head];
        if (arrive > t) {
            md.next = arrive;  // NEVER: fetch wakes us
            return;
        }
        T kind = fi(insn, F_KIND);
        T ready = std::max(arrive, md.free_at);
        if (m == M_COMPUTE && kind != K_LOOP) ready = std::max(ready, md.drain_at);
        if (ready > t) {
            md.next = ready;
            return;
        }
        T when;
        int queue = -1;
        if (!pops_ready(insn, t, &when, &queue)) {
            if (md.wait_from < 0) md.wait_from = ready;
            md.waiting_on = queue;
            md.next = when;  // NEVER: the producer wakes us
            return;
        }
        start(md, insn, t, ready);
    }

    void start(Module& md, T insn, T s, T ready) {
        // stall: cycles the head waited for tokens (compute: not while its pipeline ran)
        T from = md.wait_from >= 0 ? std::max(md.wait_from, ready) : s;
        T stall = s - from;
        if (md.id == M_COMPUTE && stall > 0) {
            T lo = std::max(from, md.pipe_lo), hi = std::min(s, md.pipe_hi);
            if (hi > lo) stall -= hi - lo;
        }
        md.stall += stall;
        md.wait_from = -1;
        md.waiting_on = -1;
        md.starts.push_back(s);
        md.start_at = s;
        if (md.id == M_COMPUTE && gemm_tail >= 0) {  // an empty accumulating GEMM's retire cycle
            if (s != gemm_tail) gemm.add(gemm_tail, gemm_tail + 1, tr, TR_GEMM, 1, gemm_tail_insn);
            gemm_tail = -1;
        }
        pop_tokens(insn, s);
        if (f_routed < n_insns && fi(f_routed, F_MODULE) == md.id) {
            if (now > s + 1) now = s + 1;  // a full command queue gets room
        }
        T kind = fi(insn, F_KIND);
        T label = insn;
        if (kind == K_DMA) {
            md.state = 1;
            md.done_at = NEVER;
            if (md.id == M_STORE) {
                start_store(int(insn), s);
            } else {
                start_read(int(fi(insn, F_CLIENT)), md.id, int(insn), s);
            }
            // the memory process catches up to s before the DMA's first request
            return;
        }
        md.state = 2;
        if (kind == K_LOOP && fi(insn, F_UOPS) > 0) {
            T n = fi(insn, F_UOPS);
            md.retire_at = s + n;
            md.busy.add(s, s + n + 1, tr, TR_BUSY, md.id, label);
            md.busy.add(s + 1, s + n + 4, tr, TR_BUSY, md.id, label);
            md.pipe_lo = s + 1;
            md.pipe_hi = s + n + 4;
            T pushes = fi(insn, F_PUSHES);
            md.drain_at = s + n + 4 + (pushes ? 1 : 0);
            if (fi(insn, F_GEMM_ACC)) gemm.add(s, s + n + 4, tr, TR_GEMM, 1, label);
            push_tokens(pushes, s + n + 5);  // sent from the write stage (counter room assumed)
            md.next = md.retire_at;
            return;
        }
        md.retire_at = s + 1;
        if (kind == K_LOOP && fi(insn, F_GEMM_ACC)) {
            // its start cycle, and its retire cycle unless another instruction starts then
            // (the GEMM busy event follows the instruction that started last)
            gemm.add(s, s + 1, tr, TR_GEMM, 1, label);
            gemm_tail = s + 1;
            gemm_tail_insn = label;
        }
        md.next = s + 1;
    }

    void retire(Module& md, T t) {
        T insn = md.insns[md.head];
        T kind = fi(insn, F_KIND);
        T r = std::max(t, md.retire_at);
        bool loop = kind == K_LOOP && fi(insn, F_UOPS) > 0;
        T pushes = loop ? 0 : fi(insn, F_PUSHES);
        if (pushes && !room_for(pushes, r)) {
            if (md.wait_from < 0) md.wait_from = r;
            md.waiting_on = 4;
            md.state = 2;
            return;  // a pop wakes us
        }
        if (md.waiting_on == 4) {
            md.stall += r - md.wait_from;
            md.wait_from = -1;
            md.waiting_on = -1;
        }
        if (!loop) md.busy.add(md.start_at, r + 1, tr, TR_BUSY, md.id, insn);
        push_tokens(pushes, r + 1);
        md.free_at = r;
        md.state = 0;
        ++md.head;
        if (kind == K_FINISH) {
            finish_cycles = r + 1;
            return;
        }
        md.next = r;
    }

    int run() {
        T limit = p[P_MAX_CYCLES];
        for (;;) {
            if (finish_cycles >= 0) return S_DONE;
            T tmin = NEVER;
            int who = -1;
            for (int m = 0; m < 3; ++m)
                if (mod[m].next < tmin) {
                    tmin = mod[m].next;
                    who = m;
                }
            if (now < tmin && memory_active()) {
                advance_memory(std::min(tmin, limit + 1));
                if (now > limit) return S_CYCLE_LIMIT;
                continue;
            }
            if (who < 0) return S_DEADLOCK;
            if (tmin > limit) return S_CYCLE_LIMIT;
            if (now < tmin) now = tmin;
            // FINISH must be the last instruction of every module
            step(who);
            if (finish_cycles >= 0) {
                for (int m = 0; m < 3; ++m)
                    if (mod[m].head < mod[m].insns.size()) return S_FINISH_EARLY;
            }
        }
    }

    void results(T* r) {
        r[R_STATUS] = status;
        r[R_CYCLES] = finish_cycles;
        for (int m = 0; m < 3; ++m) {
            r[R_BUSY0 + m] = mod[m].busy.total;
            r[R_STALL0 + m] = mod[m].stall;
            r[R_HEAD0 + m] = mod[m].head < mod[m].insns.size() ? mod[m].insns[mod[m].head] : -1;
            r[R_WAIT0 + m] = mod[m].waiting_on;
        }
        r[R_GEMM_BUSY] = gemm.total;
        for (int q = 0; q < 4; ++q) r[R_TOKENS0 + q] = T(tok[q].visible.size()) - tok[q].pops;
        r[R_READ_BEATS] = read_beats;
        r[R_WRITE_BEATS] = write_beats;
    }
};

}  // namespace

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
