# Under -DSPKDDP_SANITIZE=ON every test runs with the sanitizers' options: a report ends the
# process with a failure exit, the runtime libraries' own leaks are suppressed (lsan.supp).
if(SPKDDP_SANITIZE OR SPKDDP_FUZZ)
  set(spk_san_env
    "ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:detect_stack_use_after_return=0"
    "LSAN_OPTIONS=suppressions=${CMAKE_CURRENT_LIST_DIR}/lsan.supp:print_suppressions=0"
    "UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1")
  get_property(spk_san_tests DIRECTORY PROPERTY TESTS)
  foreach(t ${spk_san_tests})
    set_property(TEST ${t} APPEND PROPERTY ENVIRONMENT ${spk_san_env})
  endforeach()
endif()
