// The memory process, cycle by cycle: the read DMAs (burst requester, unpacker, pad writer),
// the round-robin read arbiter with its in-flight ids, the R register slice and the DRAM model
// of harness.cpp (latency, bandwidth credit, read/write alternation).
#include "model.h"

namespace timing {

void Model::start_read(int client, int module, int insn, T s) {
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

void Model::set_row(ReadDma& d) {
    T start = (d.base + d.req_row * d.stride) * d.eb, end = start + d.x * d.eb - 1;
    d.req_word = start / bus;
    d.req_left = end / bus - start / bus + 1;
}

void Model::finish_read(ReadDma& d, T last_write) {
    d.active = false;
    Module& m = mod[d.module];
    m.done_at = last_write + 1;
    wake(d.module, last_write + 1);
}

bool Model::is_data(const ReadDma& d) const {
    return d.wy >= d.yp0 && d.wy < d.yp0 + d.y && d.wx >= d.xp0 && d.wx < d.xp0 + d.x;
}

void Model::advance_writer(ReadDma& d, T c) {
    d.wnext = c + 1;
    bool data_row = d.wy >= d.yp0 && d.wy < d.yp0 + d.y;
    if (++d.wx == d.row_len) {
        d.wx = 0;
        if (data_row) d.row_elem += d.stride;
        if (++d.wy == d.rows) finish_read(d, c);
    }
}

bool Model::client_cycle(ReadDma& d, T c, bool head) {
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

bool Model::read_requesting(int k, T c) {
    if (k == 0) return fetch_may_request(c);
    const ReadDma& d = rd[k];
    return d.active && d.req_time <= c && d.req_row < d.y;
}

void Model::grant(int k, T c) {
    T beats;
    if (k == 0) {
        beats = burst_beats(f_req_word, f_req_left, f_burst);
        f_req_left -= beats;
        f_req_word += beats;
        f_requested += beats;
        ++f_version;
        f_req_time = c + 1;
    } else {
        ReadDma& d = rd[k];
        beats = burst_beats(d.req_word, d.req_left, max_burst);
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

void Model::arbiter(T c, int ids_now) {
    if (ids_now >= inflight) return;
    unsigned requesting = 0;  // one bit per client
    for (int k = 0; k < 5; ++k) requesting |= unsigned(read_requesting(k, c)) << k;
    if (!requesting) return;
    for (int step = 1; step <= 5; ++step) {  // round robin from the client after the last grant
        int k = rr_last + step < 5 ? rr_last + step : rr_last + step - 5;
        if (requesting >> k & 1) {
            grant(k, c);
            return;
        }
    }
}

void Model::cycle(T c) {
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
        ++f_version;
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

void Model::take_beat() {
    Beat b = rslice.front();
    rslice.pop();
    if (b.last) ++ids_freed;
}

T Model::quiet_until(T c) {
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

void Model::advance_memory(T limit) {
    horizon = limit;
    while (now < horizon) {
        if (st.active) {  // a STORE moves every cycle: no fast path, no skipping
            cycle(now);
            ++now;
            continue;
        }
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

}  // namespace timing
