// The store DMA: AW requests (at most AW_AHEAD ahead), the out reader's FIFO, the packer and
// the W register slice.
#include "model.h"

namespace timing {

void Model::store_cycle(T c, bool w_accepted) {
    auto& s = st;
    if (!s.active) return;
    bool slice_full = s.w_slice.full();  // its level before this cycle's pop (SyncFIFO)
    if (w_accepted) s.w_slice.pop();
    // packer output into the W slice
    bool fire = s.ob_valid && s.ahead != 0 && !slice_full;
    int ahead_next = s.ahead;
    bool ob_next = s.ob_valid && !fire;
    if (fire) {
        bool last = s.beat_no == s.lens.front() - 1;
        s.w_slice.push({c + 1, last});
        s.beat_no = last ? 0 : s.beat_no + 1;
        if (last) {
            --ahead_next;
            s.lens.pop();
        }
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
        T beats = burst_beats(s.req_word, s.req_left, max_burst);
        s.req_left -= beats;
        s.req_word += beats;
        s.lens.push(beats);
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

void Model::store_row() {
    auto& s = st;
    T start = (s.base + s.req_row * s.stride) * out_eb, end = start + s.x * out_eb - 1;
    s.req_word = start / bus;
    s.req_left = end / bus - start / bus + 1;
}

bool Model::store_drained() const {
    const auto& s = st;
    return s.req_row >= s.y && s.rd_issued == s.rd_total && !s.in_flight && s.fifo.empty() &&
           !s.ob_valid && s.left == 0 && s.ahead == 0 && s.w_slice.empty() &&
           wq_pending.empty();
}

void Model::start_store(int insn, T s0) {
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
    s.lens.clear();
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

}  // namespace timing
