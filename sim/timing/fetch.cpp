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

const Model::FetchView& Model::refresh_fetch() {
    FetchView& v = f_view;
    v.version = f_version;
    v.has_data = f_routed < n_insns && (!f_fifo.empty() || f_gather > 0);
    v.can_gather = f_per_insn_beats > 1 && f_gather < f_per_insn_beats && !f_fifo.empty();
    v.room_at = NEVER;
    if (f_routed < n_insns) {
        const Module& md = mod[fi(f_routed, F_MODULE)];
        T idx = routed_per[md.id] - depth;  // the queue entry whose start makes room
        v.room_at = idx < 0 ? -1 : idx < T(md.starts.size()) ? md.starts[idx] + 1 : NEVER;
    }
    v.request_at = NEVER;
    if (f_req_left > 0) {  // level + pending + beats <= buffer, level + pending = requested - taken
        T need = f_requested + burst_beats(f_req_word, f_req_left, f_burst) - f_buffer;
        if (need <= 0) v.request_at = f_req_time;
        else if (need <= T(f_take.size())) v.request_at = std::max(f_req_time, f_take[need - 1] + 1);
    }
    return v;
}

void Model::route(T c) {  // one instruction into its command queue at cycle c
    ++f_version;
    T i = f_routed++;
    int m = int(fi(i, F_MODULE));
    Module& md = mod[m];
    md.arrive[routed_per[m]++] = c + 1;
    if (T(md.head) + 1 == routed_per[m]) wake(m, c + 1);
}

void Model::fetch_cycle(T c) {
    if (f_routed >= n_insns) return;
    bool room = fetch_view().room_at <= c;
    if (f_per_insn_beats > 1) {  // gather several beats per instruction
        bool full = f_gather == f_per_insn_beats && f_full_at <= c;
        bool taken = full && room;
        if (taken) route(c);
        bool head = !f_fifo.empty() && f_fifo.front() <= c;
        if (head && (f_gather < f_per_insn_beats || taken)) {
            ++f_version;
            f_fifo.pop();
            f_take.push_back(c);
            f_gather = taken ? 1 : f_gather + 1;
            if (f_gather == f_per_insn_beats) f_full_at = c + 1;
        } else if (taken) {
            ++f_version;
            f_gather = 0;
        }
    } else {
        bool head = !f_fifo.empty() && f_fifo.front() <= c;
        if (head && room) {
            route(c);
            ++f_pos;
            if (f_pos == f_per_beat || f_routed == n_insns) {
                ++f_version;
                f_pos = 0;
                f_fifo.pop();
                f_take.push_back(c);
            }
        }
    }
}

}  // namespace timing
