// Run-until-done harness for the Verilated `accel` (hw/rtl/CONTRACT.md), called through ctypes.
//
// One call of sim_run() resets the model, pulses `start` and clocks it until `done`, serving the
// memory master from a DRAM image owned by the caller (a numpy buffer, used in place).
//
// DRAM model (mirrored by sim/rtl/dram.py; the timing model is calibrated against it):
// * Requests: AR and AW are accepted while fewer than QUEUE_CAP of that kind are outstanding.
//   Every request is checked when accepted: aligned to the bus, at most max_burst_beats beats,
//   inside the image, not across a 4 KiB boundary (AXI forbids it; the boundary is a parameter).
//   A failed check stops the run with the request in the result.
// * Reads are served in order.  The first beat of a read is offered latency_cycles cycles after
//   its AR was accepted, later beats as bandwidth allows.
// * Bandwidth: one channel shared by R and W.  Every cycle adds bytes_per_cycle bytes of credit,
//   capped at max(bytes_per_cycle, BUS_BYTES); a beat (either way) needs BUS_BYTES of credit.
//   When both directions have work they alternate; otherwise reads go first.
// * A W beat writes DRAM when accepted (strobes honoured); it must belong to an accepted AW
//   (one accepted in the same cycle counts) and carry w_last exactly on the burst's last beat.
#include <cstdint>
#include <cstring>
#include <deque>
#include <vector>

#include "Vaccel.h"
#include "verilated.h"

#ifndef BUS_BYTES
#error "compile with -DBUS_BYTES=<cfg.bus_bytes>"
#endif

namespace {

constexpr uint64_t QUEUE_CAP = 256;

template <class T>
inline void* raw(T& port) { return &port; }
template <std::size_t N>
inline void* raw(VlWide<N>& port) { return port.data(); }
template <class T>
inline uint64_t as_u64(const T& port) { return static_cast<uint64_t>(port); }

// Parameter and result slots, as uint64 arrays shared with sim/rtl/backend.py.
enum Param { P_INSN_ADDR, P_INSN_COUNT, P_LATENCY, P_BYTES_PER_CYCLE, P_MAX_CYCLES,
             P_MAX_BURST, P_IDLE_LIMIT, P_BOUNDARY, N_PARAMS };
enum Status { S_DONE = 0, S_CYCLE_LIMIT = 1, S_OUT_OF_BOUNDS = 2, S_PROTOCOL = 3,
              S_DEADLOCK = 4 };
enum Problem { X_NONE = 0, X_MISALIGNED = 1, X_BURST_TOO_LONG = 2, X_W_WITHOUT_AW = 3,
               X_W_LAST = 4, X_CROSSES_BOUNDARY = 5 };
enum Channel { C_READ = 0, C_WRITE = 1 };
enum Result { R_STATUS, R_CYCLES, R_PROBLEM, R_CHANNEL, R_ADDR, R_BYTES, R_BEATS_LEN,
              R_READS_PENDING, R_WRITES_PENDING, R_READ_BEATS, R_WRITE_BEATS, R_COUNTERS,
              N_RESULTS = R_COUNTERS + 18 };

#define COUNTERS(X)                                                                           \
    X(cycles) X(load_busy_cycles) X(load_stall_cycles) X(compute_busy_cycles)               \
    X(compute_stall_cycles) X(store_busy_cycles) X(store_stall_cycles) X(gemm_busy_cycles)  \
    X(gemm_uops) X(alu_uops) X(inp_load_bytes) X(wgt_load_bytes) X(acc_load_bytes)         \
    X(uop_load_bytes) X(out_store_bytes) X(load_insns) X(compute_insns) X(store_insns)
#define NAME(n) #n ","
const char COUNTER_NAMES[] = COUNTERS(NAME);

struct Burst {
    uint64_t addr;
    uint64_t beats;
    uint64_t beat;
    uint64_t ready_cycle;
};

// Activity trace (only when enabled, so untraced runs keep their speed): one bit per event
// of a cycle, from the hardware's own counters (a counter that advanced in a cycle means its
// event signal was high) and the memory handshakes; stored run-length encoded as
// (first cycle, mask) pairs, a pair whenever the mask changes.  Bits: sim/rtl/trace.py.  Each
// read request is also kept, as (cycle, address, len), to tell which DMA its beats belong to.
enum TraceBit { T_LOAD_BUSY, T_LOAD_STALL, T_COMPUTE_BUSY, T_COMPUTE_STALL, T_STORE_BUSY,
                T_STORE_STALL, T_GEMM_BUSY, T_LOAD_INSN, T_COMPUTE_INSN, T_STORE_INSN,
                T_GEMM_UOP, T_ALU_UOP, T_AR, T_R, T_R_LAST, T_AW, T_W, T_W_LAST };

struct Trace {
    bool on = false;
    std::vector<uint64_t> rle;
    std::vector<uint64_t> reads;  // (cycle, addr, len) of each accepted AR
    uint64_t mask = ~uint64_t(0);
    uint64_t prev[12] = {};

    void clear() {
        rle.clear();
        reads.clear();
        mask = ~uint64_t(0);
        std::memset(prev, 0, sizeof prev);
    }
    void record(uint64_t now, uint64_t bits) {
        if (bits == mask) return;
        mask = bits;
        rle.push_back(now);
        rle.push_back(bits);
    }
};

struct Sim {
    VerilatedContext ctx;
    Vaccel* top;
    Trace trace;
    Sim() { top = new Vaccel{&ctx, "accel"}; }
    ~Sim() {
        top->final();
        delete top;
    }
    // A fresh model: every run starts from zeroed SRAMs, as fsim's do (reset clears only the
    // registers, and a program reading a buffer before writing it would otherwise see the last
    // run's data).
    void renew() {
        top->final();
        delete top;
        top = new Vaccel{&ctx, "accel"};
    }
};

void tick(Vaccel* top) {
    top->clk = 0;
    top->eval();
    top->clk = 1;
    top->eval();
}

void reset(Vaccel* top) {
    top->rst = 1;
    top->start = 0;
    top->mem_ar_ready = 0;
    top->mem_aw_ready = 0;
    top->mem_r_valid = 0;
    top->mem_r_last = 0;
    top->mem_w_ready = 0;
    std::memset(raw(top->mem_r_data), 0, BUS_BYTES);
    tick(top);
    tick(top);
    top->rst = 0;
}

struct Run {
    Vaccel* top;
    uint8_t* dram;
    uint64_t dram_bytes;
    const uint64_t* p;
    uint64_t* r;
    Trace* trace;
    uint64_t bits = 0;  // this cycle's handshake bits, for the trace
    std::deque<Burst> reads, writes;
    uint64_t credit = 0;
    bool write_turn = false;

    // Checks a request; on failure fills the result and returns false.
    bool check(Channel ch, uint64_t addr, uint64_t len) {
        uint64_t beats = len + 1, bytes = beats * BUS_BYTES;
        Problem problem = X_NONE;
        Status status = S_PROTOCOL;
        if (addr % BUS_BYTES) problem = X_MISALIGNED;
        else if (beats > p[P_MAX_BURST]) problem = X_BURST_TOO_LONG;
        else if (addr + bytes > dram_bytes) status = S_OUT_OF_BOUNDS;
        else if (addr / p[P_BOUNDARY] != (addr + bytes - 1) / p[P_BOUNDARY])
            problem = X_CROSSES_BOUNDARY;
        else return true;
        return fail(status, problem, ch, addr, bytes, len);
    }

    bool fail(Status status, Problem problem, Channel ch, uint64_t addr, uint64_t bytes,
              uint64_t len) {
        r[R_STATUS] = status;
        r[R_PROBLEM] = problem;
        r[R_CHANNEL] = ch;
        r[R_ADDR] = addr;
        r[R_BYTES] = bytes;
        r[R_BEATS_LEN] = len;
        return false;
    }

    void write_beat(Burst& w) {
        uint8_t* dst = dram + w.addr + w.beat * BUS_BYTES;
        const uint8_t* src = static_cast<const uint8_t*>(raw(top->mem_w_data));
        uint8_t strb[(BUS_BYTES + 7) / 8];
        std::memcpy(strb, raw(top->mem_w_strb), sizeof strb);
        for (unsigned k = 0; k < BUS_BYTES; ++k)
            if (strb[k / 8] >> (k % 8) & 1) dst[k] = src[k];
    }

    // One clock cycle; returns false when the run must stop with an error.
    bool cycle(uint64_t now) {
        const uint64_t cap = p[P_BYTES_PER_CYCLE] > BUS_BYTES ? p[P_BYTES_PER_CYCLE] : BUS_BYTES;
        credit = credit + p[P_BYTES_PER_CYCLE] > cap ? cap : credit + p[P_BYTES_PER_CYCLE];
        bool read_ready = !reads.empty() && reads.front().ready_cycle <= now;
        bool write_work = !writes.empty();
        bool r_offer, w_offer;
        if (write_work && (write_turn || !read_ready)) {
            w_offer = credit >= BUS_BYTES;
            r_offer = read_ready && credit >= BUS_BYTES * (1 + w_offer);
        } else {
            r_offer = read_ready && credit >= BUS_BYTES;
            w_offer = credit >= BUS_BYTES * (1 + r_offer);
        }
        top->clk = 0;
        top->start = now == 0;
        top->mem_ar_ready = reads.size() < QUEUE_CAP;
        top->mem_aw_ready = writes.size() < QUEUE_CAP;
        top->mem_r_valid = r_offer;
        top->mem_w_ready = w_offer;
        if (r_offer) {
            Burst& rd = reads.front();
            std::memcpy(raw(top->mem_r_data), dram + rd.addr + rd.beat * BUS_BYTES, BUS_BYTES);
            top->mem_r_last = rd.beat + 1 == rd.beats;
        } else {
            top->mem_r_last = 0;
        }
        top->eval();
        bits = 0;

        if (r_offer && top->mem_r_ready) {
            bits |= 1u << T_R | uint64_t(top->mem_r_last) << T_R_LAST;
            credit -= BUS_BYTES;
            write_turn = true;
            ++r[R_READ_BEATS];
            if (++reads.front().beat == reads.front().beats) reads.pop_front();
        }
        if (top->mem_aw_valid && top->mem_aw_ready) {
            uint64_t addr = top->mem_aw_addr, len = top->mem_aw_len;
            if (!check(C_WRITE, addr, len)) return false;
            bits |= 1u << T_AW;
            writes.push_back({addr, len + 1, 0, now});
        }
        if (w_offer && top->mem_w_valid) {
            if (writes.empty()) return fail(S_PROTOCOL, X_W_WITHOUT_AW, C_WRITE, 0, 0, 0);
            Burst& w = writes.front();
            bool last = w.beat + 1 == w.beats;
            if (bool(top->mem_w_last) != last)
                return fail(S_PROTOCOL, X_W_LAST, C_WRITE, w.addr, w.beats * BUS_BYTES, w.beat);
            write_beat(w);
            bits |= 1u << T_W | uint64_t(last) << T_W_LAST;
            credit -= BUS_BYTES;
            write_turn = false;
            ++r[R_WRITE_BEATS];
            if (++w.beat == w.beats) writes.pop_front();
        }
        if (top->mem_ar_valid && top->mem_ar_ready) {
            uint64_t addr = top->mem_ar_addr, len = top->mem_ar_len;
            if (!check(C_READ, addr, len)) return false;
            bits |= 1u << T_AR;
            if (trace->on) trace->reads.insert(trace->reads.end(), {now, addr, len});
            reads.push_back({addr, len + 1, 0, now + p[P_LATENCY]});
        }
        top->clk = 1;
        top->eval();
        if (trace->on) record(now);
        return true;
    }

    // The events of cycle `now`: counters that advanced at its clock edge, and the handshakes.
    void record(uint64_t now) {
        const uint64_t counters[12] = {
            as_u64(top->cnt_load_busy_cycles), as_u64(top->cnt_load_stall_cycles),
            as_u64(top->cnt_compute_busy_cycles), as_u64(top->cnt_compute_stall_cycles),
            as_u64(top->cnt_store_busy_cycles), as_u64(top->cnt_store_stall_cycles),
            as_u64(top->cnt_gemm_busy_cycles), as_u64(top->cnt_load_insns),
            as_u64(top->cnt_compute_insns), as_u64(top->cnt_store_insns),
            as_u64(top->cnt_gemm_uops), as_u64(top->cnt_alu_uops)};
        uint64_t mask = bits;
        for (int i = 0; i < 12; ++i) {
            if (counters[i] > trace->prev[i]) mask |= uint64_t(1) << i;
            trace->prev[i] = counters[i];
        }
        trace->record(now, mask);
    }

    void finish(uint64_t cycles) {
        r[R_CYCLES] = cycles;
        r[R_READS_PENDING] = reads.size();
        r[R_WRITES_PENDING] = writes.size();
        uint64_t* c = r + R_COUNTERS;
#define READ(n) *c++ = as_u64(top->cnt_##n);
        COUNTERS(READ)
#undef READ
    }
};

}  // namespace

extern "C" {

const char* sim_counter_names() { return COUNTER_NAMES; }
uint64_t sim_bus_bytes() { return BUS_BYTES; }
uint64_t sim_n_results() { return N_RESULTS; }

void* sim_new() { return new Sim(); }

void sim_free(void* handle) { delete static_cast<Sim*>(handle); }

// Record an activity trace in the following runs (or stop recording).
void sim_trace_enable(void* handle, int on) { static_cast<Sim*>(handle)->trace.on = on != 0; }

// Length (uint64 words) of the last run's trace (part 0: the bits, 1: the read requests), and a
// copy of it into `out`.
static const std::vector<uint64_t>& trace_part(void* handle, int part) {
    Trace& t = static_cast<Sim*>(handle)->trace;
    return part ? t.reads : t.rle;
}
uint64_t sim_trace_length(void* handle, int part) { return trace_part(handle, part).size(); }
void sim_trace_copy(void* handle, int part, uint64_t* out) {
    const std::vector<uint64_t>& v = trace_part(handle, part);
    std::memcpy(out, v.data(), v.size() * sizeof(uint64_t));
}

// Runs the program at params[P_INSN_ADDR] to completion; see the enums for the slots.
int sim_run(void* handle, uint8_t* dram, uint64_t dram_bytes, const uint64_t* params,
            uint64_t* result) {
    Sim* sim = static_cast<Sim*>(handle);
    sim->renew();
    Vaccel* top = sim->top;
    std::memset(result, 0, N_RESULTS * sizeof(uint64_t));
    sim->trace.clear();
    reset(top);
    top->insn_addr = static_cast<uint32_t>(params[P_INSN_ADDR]);
    top->insn_count = static_cast<uint32_t>(params[P_INSN_COUNT]);
    Run run{top, dram, dram_bytes, params, result, &sim->trace};
    uint64_t now = 0, progress = 0, progress_at = 0;
    for (;; ++now) {
        if (now > 0 && top->done) {
            result[R_STATUS] = S_DONE;
            break;
        }
        if (now >= params[P_MAX_CYCLES]) {
            result[R_STATUS] = S_CYCLE_LIMIT;
            break;
        }
        // Watchdog: a run that retires no instruction, executes no micro-op and moves no bus
        // beat for idle_limit cycles is deadlocked (every module waits on a token).
        if ((now & 255) == 0) {
            uint64_t seen = as_u64(top->cnt_load_insns) + as_u64(top->cnt_compute_insns) +
                            as_u64(top->cnt_store_insns) + as_u64(top->cnt_gemm_uops) +
                            as_u64(top->cnt_alu_uops) + result[R_READ_BEATS] +
                            result[R_WRITE_BEATS];
            if (seen != progress) {
                progress = seen;
                progress_at = now;
            } else if (now - progress_at > params[P_IDLE_LIMIT]) {
                result[R_STATUS] = S_DEADLOCK;
                break;
            }
        }
        if (!run.cycle(now)) break;
    }
    run.finish(now);
    if (sim->trace.on) sim->trace.record(now, 0);  // the end of the last run of bits
    return static_cast<int>(result[R_STATUS]);
}

}  // extern "C"
