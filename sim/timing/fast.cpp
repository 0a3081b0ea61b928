// The fast paths of the memory process: one read client alone, nothing else moving, advanced
// burst by burst (whole-beat elements) or beat by beat (padding, narrow elements); both rebuild
// the per-cycle state exactly where they stop (tests compare them with cycle stepping).
#include "model.h"

namespace timing {

int Model::streaming_client(T c) {
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
    bool fetch_beats = false;  // fetch's bursts in flight (its blocked beat FIFO takes them)
    for (int i = 0; i < rq.n; ++i) {
        int client = rq.v[(rq.head + i) % 128].client;
        if (client != k && client != 0) return 0;
        fetch_beats |= client == 0;
    }
    int lasts = 0;
    for (int i = 0; i < rslice.n; ++i) {
        const Beat& b = rslice.v[(rslice.head + i) % 2];
        if (b.client != k && b.client != 0) return 0;
        fetch_beats |= b.client == 0;
        lasts += b.last;
    }
    if (ids != rq.n + lasts) return 0;
    // whole beats, no padding: whole bursts in closed form (a few cycles apart stepped)
    if (!fetch_beats && d.eb >= bus && !d.yp0 && !d.yp1 && !d.xp0 && !d.xp1) {
        bool steady = d.wnext <= c && !(d.gather == d.eb / bus && d.eb > bus && d.full_at < c) &&
                      rslice.n <= 1 && (rslice.empty() || rslice.front().visible <= c);
        return steady ? k : 0;
    }
    return -k;  // padding, narrow elements or fetch's beats between: beat by beat
}

void Model::stream_takes(ReadDma& d, T t1, T count) {
    T per = d.eb / bus;  // a power of two: shifts and masks below
    if (per == 1) {
        advance_elems(d, count, t1 + count - 1);
        return;
    }
    int shift = __builtin_ctzll(uint64_t(per));
    T mask = per - 1, g = d.gather;
    T t0 = g == 0 ? per : (per - g) & mask;  // first take cycle (offset) that writes
    T writes = t0 < count ? ((count - 1 - t0) >> shift) + 1 : 0;
    d.gather = int(g == 0 ? ((count - 1) & mask) + 1 : ((g - 1 + count) & mask) + 1);
    if (writes) advance_elems(d, writes, t1 + t0 + ((writes - 1) << shift));
    if (d.gather == per) d.full_at = t1 + count;
}

void Model::advance_elems(ReadDma& d, T n, T last_write) {
    d.wx += n;
    if (d.wx >= d.x) {
        T rows = d.wx / d.x;
        d.wx -= rows * d.x;
        d.wy += rows;
        d.row_elem += rows * d.stride;
    }
    d.wnext = last_write + 1;
    if (d.wy == d.rows) finish_read(d, last_write);
}

void Model::flush_gather(ReadDma& d, T before) {
    T per = d.eb / bus;
    if (per > 1 && d.active && d.gather == per && d.full_at < before) {
        d.gather = 0;
        advance_elems(d, 1, d.full_at);
    }
}

void Model::stream(int k, T stop) {
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
    leave_fast(end, last_o, offers);
}

// The per-cycle state where a fast path stops at `end`: bursts still in flight, the arbiter's
// turn, the DRAM bandwidth credit (the last beat offered at `last_o`).
void Model::leave_fast(T end, T last_o, T offers) {
    ids = 0;
    for (T f : frees)
        if (f > end) ++ids;
    if (offers) write_turn = true;
    T cap = std::max(bpc, bus);
    credit = last_o == end - 1 ? cap - bus : cap;
    credit_cycle = end - 1;
    now = end;
}

T Model::pads_ahead(const ReadDma& d) const {
    T y = d.wy, x = d.wx;
    if (d.y == 0 || y >= d.yp0 + d.y) return (d.rows - y) * d.row_len - x;
    if (y < d.yp0) return (d.yp0 - y) * d.row_len - x + d.xp0;
    if (x < d.xp0) return d.xp0 - x;
    if (x < d.xp0 + d.x) return 0;
    if (y + 1 < d.yp0 + d.y) return d.row_len - x + d.xp0;
    return (d.rows - y) * d.row_len - x;
}

void Model::advance_pos(ReadDma& d, T n) {  // the writer moves n positions (division-free mostly)
    d.wx += n;
    if (d.wx >= d.row_len) {
        T rows = d.wx / d.row_len;
        d.wx -= rows * d.row_len;
        d.wy += rows;
        d.row_elem = d.base + d.stride * std::min(std::max<T>(d.wy - d.yp0, 0), d.y);
    }
}

void Model::pads_until(ReadDma& d, T lim) {  // padding written before cycle lim
    if (!d.active) return;
    T run = std::min(pads_ahead(d), lim - d.wnext);
    if (run <= 0) return;
    d.wnext += run;
    advance_pos(d, run);
    if (d.wy >= d.rows) finish_read(d, d.wnext - 1);
}

void Model::data_writes(ReadDma& d, T first, T n) {  // n data elements at first .. first + n - 1
    if (d.wnext < first) pads_until(d, first);
    d.wnext = first + n;
    advance_pos(d, n);
    if (d.wy >= d.rows) finish_read(d, first + n - 1);
}

T Model::beat_elems(const ReadDma& d, T sub, T pads) const {
    T row_elem = d.row_elem, col = d.wx - d.xp0;
    if (pads > 0) {  // the first element of the current row or of a later one
        T row = d.wy < d.yp0 ? 0 : d.wx < d.xp0 ? d.wy - d.yp0 : d.wy - d.yp0 + 1;
        row_elem = d.base + d.stride * row;
        col = 0;
    }
    T idx = (row_elem + col) & (sub - 1);
    return std::min(sub - idx, d.x - col);
}

void Model::chain(int k) {
    ReadDma& d = rd[k];
    const T c = now;
    T stop = std::min(horizon, fetch_wake(c));
    const T per = d.eb > bus ? d.eb / bus : 1, sub = d.eb < bus ? bus / d.eb : 1;
    Pend pend[2];
    int np = 0;
    T last_o = c - 1, taken1 = c - 1, taken0 = c - 2, offers = 0;  // last two takes
    frees.clear();
    for (int i = 0; i < rslice.n; ++i) {
        const Beat& b = rslice.v[(rslice.head + i) % 2];
        pend[np++] = Pend{b.visible - 1, b.client, b.last};
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
        while (np > 0) {
            T visible = std::max(pend[0].o + 1, taken1 + 1), a;
            if (pend[0].client == 0) {  // fetch's beat FIFO takes its beat at once
                a = visible;
                if (a >= lim()) break;
                f_fifo.push(a + 1);
                ++f_version;
                if (fetch_busy(a + 1)) stop = std::min(stop, a + 1);  // its gather wakes up
            } else if (!d.active) {
                break;
            } else if (per > 1) {
                if (d.gather == per) break;  // waits for its write
                a = d.gather == 0 ? std::max(visible, gather_free) : visible;
                if (a >= lim()) break;
                if (++d.gather == per) d.full_at = a + 1;
            } else {
                T pads = pads_ahead(d);  // before the element this beat starts with
                T first = std::max(visible, d.wnext + pads);
                T n = sub > 1 ? beat_elems(d, sub, pads) : 1;
                a = first + n - 1;
                if (first >= lim()) break;
                if (pads) pads_until(d, first);
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
        // the pad writer runs on meanwhile: its writes before the next event come first (the
        // last one finishes the DMA and wakes its module, which may end this fast path)
        T next = std::min(g_unknown ? NEVER : g, o);
        if (d.active && next < L) {
            pads_until(d, next);
            write_full();
            L = lim();
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
        tr.add(TR_READ, o, o + 1, b.client);
        last_o = o;
        bool done = b.sent == b.beats;
        pend[np++] = Pend{o, b.client, done};
        if (done) rq.pop();
    }
    T end = std::max(c + 1, lim());
    if (end >= NEVER) end = std::max(last_o, taken1) + 2;  // (the DMA is done)
    if (d.active) {
        pads_until(d, end);
        write_full();
    }
    end = std::max(c + 1, std::min(end, horizon));
    for (int i = 0; i < np; ++i) rslice.push(Beat{pend[i].client, pend[i].last, pend[i].o + 1});
    leave_fast(end, last_o, offers);
}

}  // namespace timing
