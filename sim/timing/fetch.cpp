// Fetch: instruction bursts under the beat-buffer credits, unpacking, routing into the three
// command queues (a full queue stalls it).
#include "model.h"

namespace timing {

void Model::init_fetch() {
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

bool Model::queue_room_at(int m, T c) {  // whether module m's command queue takes a write at c
    return routed_per[m] - started_before(mod[m], c) < depth;  // routed: all before c
}

T Model::started_before(Module& md, T c) {
    if (c < md.seen_at) {
        return std::lower_bound(md.starts.begin(), md.starts.end(), c) - md.starts.begin();
    }
    md.seen_at = c;
    while (md.seen < md.starts.size() && md.starts[md.seen] < c) ++md.seen;
    return T(md.seen);
}

void Model::route(T c) {  // one instruction into its command queue at cycle c
    T i = f_routed++;
    int m = int(fi(i, F_MODULE));
    Module& md = mod[m];
    md.arrive[routed_per[m]++] = c + 1;
    if (T(md.head) + 1 == routed_per[m]) wake(m, c + 1);
}

void Model::fetch_cycle(T c) {
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

bool Model::fetch_busy(T c) {
    if (f_routed >= n_insns || (f_fifo.empty() && f_gather == 0)) return false;
    if (f_per_insn_beats > 1 && f_gather < f_per_insn_beats && !f_fifo.empty()) return true;
    return queue_room_at(int(fi(f_routed, F_MODULE)), c);
}

T Model::fetch_wake(T c) {
    T t = fetch_request_time(c);
    if (f_routed < n_insns && (!f_fifo.empty() || f_gather > 0)) {  // waits for queue room
        Module& md = mod[fi(f_routed, F_MODULE)];
        T idx = routed_per[md.id] - depth;  // the entry whose start makes room
        if (idx < T(md.starts.size())) t = std::min(t, idx < 0 ? c : md.starts[idx] + 1);
    }
    return std::max(t, c);
}

T Model::fetch_request_time(T c) {
    if (f_req_left == 0) return NEVER;
    T beats = std::min(f_req_left, f_burst);
    T need = f_requested + beats - f_buffer;
    T t = std::max(f_req_time, c);
    if (need <= 0) return t;
    if (need > T(f_take.size())) return NEVER;
    return std::max(t, f_take[need - 1] + 1);
}

}  // namespace timing
