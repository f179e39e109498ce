# The house's floors (tests/layering/check_layers.sh): includes point down, never sideways between
# wings, families or backends; every file implements its own header; no circle of includes and calls.
add_test(NAME layering COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/layering/check_layers.sh ${CMAKE_SOURCE_DIR})
set_tests_properties(layering PROPERTIES LABELS unit)
# ...and the check can fail: each old circle, and each kind of include it forbids, put back into a
# copy of the sources, is refused.
add_test(NAME layering_catches COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/layering/check_layers_catches.sh ${CMAKE_SOURCE_DIR})
set_tests_properties(layering_catches PROPERTIES LABELS unit TIMEOUT 600)
