// $finish without Verilator's "- :0: Verilog $finish" line (every model is built with
// -DVL_USER_FINISH and this file): cocotb calls $finish as each simulation ends, and
// netblt sim-board says itself what it simulated.
#include "verilated.h"

void vl_finish(const char* filename, int linenum, const char* hier) VL_MT_UNSAFE {
    (void)filename;
    (void)linenum;
    (void)hier;
    Verilated::threadContextp()->gotFinish(true);
}
