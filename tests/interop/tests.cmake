# interop/: spkddp's exports read by the real SpeechBrain, ONNX Runtime, NumPy and kaldi_io,
# in a venv over Debian's python3 with a few pinned PyPI packages (interop/pyenv.sh, made once
# per build directory). Skipped (exit 77) with the reason when that Python cannot be had; CI
# sets SPKDDP_REQUIRE_PYTHON_TESTS=1, which makes that a failure.
function(spk_interop_test name)
  set(dir ${CMAKE_CURRENT_BINARY_DIR}/work/${name})
  add_test(NAME ${name} COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/interop/${name}.sh $<TARGET_FILE:spkddp> ${SPK_MPIEXEC}
    ${dir} ${CMAKE_BINARY_DIR}/pyenv)
  set_tests_properties(${name} PROPERTIES LABELS "interop;e2e;mpi" TIMEOUT 900 SKIP_RETURN_CODE 77)
endfunction()
spk_interop_test(interop_speechbrain)
spk_interop_test(interop_onnx)
spk_interop_test(interop_formats)
spk_interop_test(interop_finetune)
spk_interop_test(interop_wespeaker)
spk_interop_test(interop_speakerlab)
spk_interop_test(interop_av)
