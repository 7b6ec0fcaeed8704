// The node under sim/rtl/harness.cpp: its inputs other than the clocks go through a
// register of their own clock's, so that Verilator does not count the node's reset
// multiplexers as logic driven from the top's inputs (its "ico" region), which it would
// evaluate again at every clock edge. The wire arrives a GMII cycle later, as through a
// PHY; link_up is tied high, as a board's MDIO reads it.
module harness_top(
    input clk, input gmii_clk, input rst_in, input gmii_reset_in,
    input [7:0] rx_data_in, input rx_dv_in,
    output [7:0] tx_data, output tx_en,
`ifdef NETBLT_DRAM
    input dram_clk, input dram_rst_in, output dram_ready,
`endif
    output activity);
    reg rst = 1, gmii_reset = 1, rx_dv = 0;
    reg [7:0] rx_data = 0;
    always @(posedge clk) rst <= rst_in;
    always @(posedge gmii_clk) begin
        gmii_reset <= gmii_reset_in;
        rx_data <= rx_data_in;
        rx_dv <= rx_dv_in;
    end
`ifdef NETBLT_DRAM
    reg dram_rst = 1;
    always @(posedge dram_clk) dram_rst <= dram_rst_in;
`endif
    wire tx_er;
    `NODE node(
        .clk(clk), .rst(rst), .activity(activity), .link_up(1'b1),
        .gmii__rx_clk(gmii_clk), .gmii__tx_clk(gmii_clk), .gmii__reset(gmii_reset),
        .gmii__rx_data(rx_data), .gmii__rx_dv(rx_dv), .gmii__rx_er(1'b0),
`ifdef NETBLT_DRAM
        .dram_clk(dram_clk), .dram_rst(dram_rst), .dram_ready(dram_ready),
`endif
        .gmii__tx_data(tx_data), .gmii__tx_en(tx_en), .gmii__tx_er(tx_er));
endmodule
