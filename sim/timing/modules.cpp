// The execution modules as event processes: the sequencer handshake (pops, pushes, stalls),
// the compute pipeline and its deferred pushes, busy/stall counters, and the event loop.
#include "model.h"

namespace timing {

void Model::init(const T* fields, T n, const T* params) {
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
    page_words = p[P_BOUNDARY] / bus;
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

void Model::wake(int m, T t) {
    Module& md = mod[m];
    if (t < md.next) md.next = t;
    if (t < horizon) horizon = t;
}

bool Model::pops_ready(T insn, T t, T* when, int* queue) {
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

void Model::pop_tokens(T insn, T s) {
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

void Model::push_tokens(T mask, T visible) {
    for (int q = 0; q < 4; ++q) {
        if (!(mask >> q & 1)) continue;
        tok[q].visible.push_back(visible);
        tr.add(TR_TOKEN, visible, q, +1);
        wake(CONSUMER[q], visible);
    }
}

bool Model::room_for(T mask, T t) {
    for (int q = 0; q < 4; ++q)
        if ((mask >> q & 1) && tok[q].count_at(t) >= token_max) return false;
    return true;
}

void Model::step(int m) {
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

void Model::start(Module& md, T insn, T s, T ready) {
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
    ++f_version;  // a start may make room in fetch's command queue
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

void Model::retire(Module& md, T t) {
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

int Model::run() {
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

void Model::results(T* r) {
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

}  // namespace timing
