/* (P, H, r = dv, auto's choice) at the simulated points of docs/sim_model.csv
 * (the `auto` column of tools/smpi/collect.py's output; included by test_scan_model.c) */
    {16, 4, 64, LA_SCAN_PIPELINED},
    {64, 4, 64, LA_SCAN_DOUBLING},
    {256, 4, 64, LA_SCAN_DOUBLING},
    {256, 4, 256, LA_SCAN_DOUBLING},
    {256, 32, 64, LA_SCAN_DOUBLING},
    {1024, 4, 64, LA_SCAN_DOUBLING},
    {1024, 4, 256, LA_SCAN_DOUBLING},
    {1024, 32, 64, LA_SCAN_DOUBLING},
    {4096, 4, 64, LA_SCAN_DOUBLING},
