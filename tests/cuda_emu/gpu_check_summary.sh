# check_summary OUT_DIR: what tools/gpu_check.sh must leave after a run on the CUDA stand-in
# (GPU_CHECK_SCALE=small, no PyTorch, no compute-sanitizer or ncu, e2e left out): every step it
# can run passed, each one it cannot says why, the figures are in the summary, and OUT_DIR
# holds at most 8 files with summary.txt and the packed logs. Sourced by gpu_check_emu.sh and
# the bundle's test.
check_summary() {
    local out=$1 summary=$1/summary.txt bad=0 s
    for s in device step1 bench-bf16 bench-resnet34-bf16 bench-campplus-bf16 bench-ecapa512-bf16 bench-ecapa512-invariant-bf16 \
        bench-tf32 bench-fp32 bench-tf32-timed bench-fp32-timed \
        bench-tf32-gemm1x1 bench-fp32-gemm1x1 kernels shapes-32 shapes-128 shapes-gemm1x1 determinism tf32; do
        grep -qE "^$s +ok" "$summary" || { echo "FAIL: step $s did not pass"; bad=1; }
    done
    for s in torch-bf16 torch-resnet34-bf16 torch-tf32 torch-fp32; do
        grep -qE "^$s +SKIP: no CUDA PyTorch" "$summary" || { echo "FAIL: $s does not say PyTorch is missing"; bad=1; }
    done
    grep -qE "^e2e +SKIP: GPU_CHECK_SKIP" "$summary" || { echo "FAIL: GPU_CHECK_SKIP=e2e did not skip e2e"; bad=1; }
    grep -qE "^sanitizer +SKIP: no compute-sanitizer" "$summary" || { echo "FAIL: the missing sanitizer is not said"; bad=1; }
    grep -qE "^profile +SKIP: no ncu" "$summary" || { echo "FAIL: the missing ncu is not said"; bad=1; }
    grep -qE "^libraries +.*libmpich" "$summary" || { echo "FAIL: the libraries are not listed"; bad=1; }
    grep -qE "one step GPU vs CPU: rel [0-9.e+-]+" "$summary" || { echo "FAIL: no GPU-vs-CPU figure"; bad=1; }
    grep -qE "^bench-fp32 +ok.* samples/s, GPU memory in use [0-9]+ MiB" "$summary" || { echo "FAIL: no bench figure"; bad=1; }
    grep -qE "^ratio-resnet34-ecapa512-bf16 +ResNet34 / ECAPA C=512 samples/s = [0-9.]+x" "$summary" ||
        { echo "FAIL: no ResNet34 / ECAPA C=512 rate"; bad=1; }
    grep -qE "^ratio-ecapa512-invariant-bf16 +invariant / default samples/s = [0-9.]+x" "$summary" ||
        { echo "FAIL: no invariant / default rate"; bad=1; }
    grep -qE "^done +[0-9]+ s, no step failed" "$summary" || { echo "FAIL: the summary does not end with done"; bad=1; }
    local n
    n=$(find "$out" -type f | wc -l)
    [ "$n" -le 8 ] || { echo "FAIL: $n files in $out (at most 8 come back from a GPU machine)"; bad=1; }
    [ "$(head -1 "$summary" | awk '{print $1}')" = gpu_check ] || { echo "FAIL: summary.txt does not start with its header"; bad=1; }
    tar -xzf "$out/logs.tar.gz" -O logs/bench-fp32.log 2>/dev/null | grep -q "fwd .*bwd-data .*bwd-filter" ||
        { echo "FAIL: logs.tar.gz holds no bench-fp32 log listing cuDNN's choices"; bad=1; }
    # with the 1x1 convolutions on cuBLAS, cuDNN plans none of them
    tar -xzf "$out/logs.tar.gz" -O logs/bench-fp32.log 2>/dev/null | grep -q "^conv1d .* K=1 " &&
        ! tar -xzf "$out/logs.tar.gz" -O logs/bench-fp32-gemm1x1.log 2>/dev/null | grep -q "^conv1d .* K=1 " ||
        { echo "FAIL: SPKDDP_CONV1X1_GEMM=1 left 1x1 convolutions to cuDNN (or bench-fp32 listed none)"; bad=1; }
    tar -xzf "$out/logs.tar.gz" -O logs/bench-fp32-timed.log 2>/dev/null | grep -q "fastest of" ||
        { echo "FAIL: the timed bench does not list timed choices"; bad=1; }
    echo "---- $summary"
    cat "$summary"
    return $bad
}
