// The simulated board's cycles in C++: a Verilated node (hw/node.py on GMII) with its
// clocks, reset and Ethernet wire, driven with no Python per cycle (issue 47).
//
// Whole frames cross the boundary: the caller hands in frames for the board's receive
// wire, each with its FCS and a simulated time before which it may not start, and takes
// the frames the board sent, as the wire carried them (FCS included) with the time their
// last byte left. Preamble, start delimiter and the gap between frames are this file's;
// sockets, ARP, the WAN path model, the pcap and the pace are sim/rtl/compiled.py's,
// called a frame or a poll at a time. A plain C interface, loaded with ctypes.

#include <cstdint>
#include <cstring>
#include <deque>
#include <vector>

#include "verilated.h"
#include "Vboard.h"

namespace {

const uint64_t GMII_HALF_PS = 4000;  // 125 MHz
const int PREAMBLE = 7, GAP = 12;    // bytes: 0x55 seven times then 0xD5; the interframe gap

struct Frame {
    std::vector<uint8_t> bytes;
    uint64_t at_ps;  // in: not before; out: when its last byte left
};

struct Clock {
    uint64_t half_ps, next_ps;
};

struct Board {
    VerilatedContext context;
    Vboard *top;
    uint64_t now_ps = 0, cycles = 0;
    Clock sys, gmii;
#ifdef NETBLT_DRAM
    Clock dram;
#endif
    std::deque<Frame> in;
    size_t in_at = 0;   // the byte of in.front() on the wire next, counting the preamble
    int gap = 0;        // gap bytes still to leave before the next frame
    std::deque<Frame> out;
    std::vector<uint8_t> sending;
};

void wire_in(Board *b)
{
    Vboard *t = b->top;
    t->rx_dv_in = 0;
    if (b->gap) {
        b->gap--;
        return;
    }
    if (b->in.empty() || b->in.front().at_ps > b->now_ps)
        return;
    const Frame &f = b->in.front();
    size_t at = b->in_at++;
    t->rx_dv_in = 1;
    t->rx_data_in = at < PREAMBLE ? 0x55 : at == PREAMBLE ? 0xD5 : f.bytes[at - PREAMBLE - 1];
    if (b->in_at == f.bytes.size() + PREAMBLE + 1) {
        b->in.pop_front();
        b->in_at = 0;
        b->gap = GAP;
    }
}

void wire_out(Board *b)
{
    Vboard *t = b->top;
    if (t->tx_en) {
        b->sending.push_back(t->tx_data);
        return;
    }
    if (b->sending.empty())
        return;
    size_t start = 0;  // past the preamble and its delimiter
    while (start < b->sending.size() && b->sending[start] != 0xD5)
        start++;
    if (start < b->sending.size())
        b->out.push_back({std::vector<uint8_t>(b->sending.begin() + start + 1, b->sending.end()), b->now_ps});
    b->sending.clear();
}

// One edge of whichever clocks are due next; the wire moves on the GMII clock's rising edge.
void edge(Board *b)
{
    Vboard *t = b->top;
    uint64_t next = b->sys.next_ps < b->gmii.next_ps ? b->sys.next_ps : b->gmii.next_ps;
#ifdef NETBLT_DRAM
    if (b->dram.next_ps < next)
        next = b->dram.next_ps;
#endif
    b->now_ps = next;
    bool gmii_rose = false;
    if (b->sys.next_ps == next) {
        t->clk = !t->clk;
        b->cycles += t->clk;
        b->sys.next_ps += b->sys.half_ps;
    }
    if (b->gmii.next_ps == next) {
        t->gmii_clk = !t->gmii_clk;
        gmii_rose = t->gmii_clk;
        b->gmii.next_ps += b->gmii.half_ps;
    }
#ifdef NETBLT_DRAM
    if (b->dram.next_ps == next) {
        t->dram_clk = !t->dram_clk;
        b->dram.next_ps += b->dram.half_ps;
    }
#endif
    b->context.time(next);
    t->eval();
    if (gmii_rose) {
        wire_out(b);
        wire_in(b);
    }
}

void run_cycles(Board *b, uint64_t count)
{
    uint64_t until = b->cycles + count;
    while (b->cycles < until)
        edge(b);
}

}  // namespace

extern "C" {

// A board out of reset, its wire idle; with a DRAM core, once the core says it is ready
// (nullptr if it never did within 5 ms of simulated time).
Board *board_new(uint64_t sys_ps, uint64_t dram_ps)
{
    Board *b = new Board;
    b->top = new Vboard{&b->context};
    Vboard *t = b->top;
    b->sys = {sys_ps / 2, sys_ps / 2};
    b->gmii = {GMII_HALF_PS, GMII_HALF_PS};
    t->rst_in = 1;
    t->gmii_reset_in = 1;
#ifdef NETBLT_DRAM
    b->dram = {dram_ps / 2, dram_ps / 2};
    t->dram_rst_in = 1;
#else
    (void)dram_ps;
#endif
    t->eval();
    run_cycles(b, 2);
    t->rst_in = 0;
#ifdef NETBLT_DRAM
    t->dram_rst_in = 0;
    // LiteDRAM's initialisation waits some 70,000 DRAM cycles before it hands over.
    while (!t->dram_ready) {
        edge(b);
        if (b->now_ps > 5000000000ull) {
            delete b->top;
            delete b;
            return nullptr;
        }
    }
#endif
    run_cycles(b, 10);
    t->gmii_reset_in = 0;
    run_cycles(b, 10);
    return b;
}

void board_free(Board *b)
{
    b->top->final();
    delete b->top;
    delete b;
}

// Runs ``count`` cycles of the board's system clock.
void board_run(Board *b, uint64_t count) { run_cycles(b, count); }

uint64_t board_now_ps(Board *b) { return b->now_ps; }

uint64_t board_cycles(Board *b) { return b->cycles; }

// Frames handed in and not yet wholly on the wire.
int board_queued(Board *b) { return (int)b->in.size(); }

// A frame (its FCS included) onto the receive wire, after those queued and not before ``at_ps``.
void board_send(Board *b, const uint8_t *bytes, int length, uint64_t at_ps)
{
    b->in.push_back({std::vector<uint8_t>(bytes, bytes + length), at_ps});
}

// The oldest frame the board sent, into ``space``: its length (its FCS included), or -1
// with none waiting; ``at_ps`` gets when its last byte left. A frame longer than
// ``capacity`` is cut there.
int board_take(Board *b, uint8_t *space, int capacity, uint64_t *at_ps)
{
    if (b->out.empty())
        return -1;
    Frame &f = b->out.front();
    int length = (int)f.bytes.size() < capacity ? (int)f.bytes.size() : capacity;
    memcpy(space, f.bytes.data(), length);
    *at_ps = f.at_ps;
    b->out.pop_front();
    return length;
}

}  // extern "C"
