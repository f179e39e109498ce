# The last line of a --metrics file as one line: samples/s, epoch time, data wait and its share
# of the step time.  usage: tail -1 metrics.jsonl | awk -v d=NAME -f tools/last_epoch.awk
{
    match($0, /"samples_per_s": [0-9.e+-]*/); sps = substr($0, RSTART + 17, RLENGTH - 17)
    match($0, /"epoch_seconds": [0-9.e+-]*/); es = substr($0, RSTART + 17, RLENGTH - 17)
    match($0, /"data_wait_s": [0-9.e+-]*/); dw = substr($0, RSTART + 15, RLENGTH - 15)
    printf "%-9s epoch 2: %.2f samples/s, epoch %.1f s, data wait %.3f s = %.2f%% of the steps\n", d, sps, es, dw, 100 * dw / es
}
