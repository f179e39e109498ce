# The dependency direction between folders (app -> io -> kernels, and the rooms of app/).
add_test(NAME layering COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/layering/check_layers.sh ${CMAKE_SOURCE_DIR})
set_tests_properties(layering PROPERTIES LABELS unit)
