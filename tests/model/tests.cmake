# model/: the encoders against PyTorch (golden files) and finite differences.
spk_unit_test(model test_ecapa_golden ${CMAKE_CURRENT_SOURCE_DIR}/golden/ecapa_golden.h5)
# Tiny networks: one thread, so a busy machine's spinning thread pools cannot stall them; one
# test per part, so that they run side by side.
spk_test_binary(model test_ecapa_model)
foreach(part ecapa ecapa-av ecapa-av-faces)
  add_test(NAME test_ecapa_model_${part} COMMAND test_ecapa_model ${part})
  set_tests_properties(test_ecapa_model_${part} PROPERTIES LABELS unit ENVIRONMENT OMP_NUM_THREADS=1)
endforeach()
# WeSpeaker's ResNets against PyTorch: BasicBlocks (resnet18) and Bottlenecks (resnet50).
spk_unit_test(model test_resnet_golden ${CMAKE_CURRENT_SOURCE_DIR}/golden/resnet18_golden.h5)
add_test(NAME test_resnet50_golden COMMAND test_resnet_golden ${CMAKE_CURRENT_SOURCE_DIR}/golden/resnet50_golden.h5 1.5e-3)
set_tests_properties(test_resnet50_golden PROPERTIES LABELS unit)
add_test(NAME test_resnet_golden_direct COMMAND test_resnet_golden ${CMAKE_CURRENT_SOURCE_DIR}/golden/resnet18_golden.h5
         5e-5 direct)
set_tests_properties(test_resnet_golden_direct PROPERTIES LABELS unit)
spk_unit_test(model test_resnet_model)
# The audio-visual encoders, one test each so that they run side by side.
spk_test_binary(model test_av_models)
foreach(enc resnet34 campplus)
  add_test(NAME test_av_models_${enc} COMMAND test_av_models ${enc}-av)
  set_tests_properties(test_av_models_${enc} PROPERTIES LABELS unit ENVIRONMENT OMP_NUM_THREADS=1)
endforeach()
# 3D-Speaker's CAM++ against its own class, with and without recomputing the dense layers' inputs.
spk_unit_test(model test_campplus_golden ${CMAKE_CURRENT_SOURCE_DIR}/golden/campplus_golden.h5)
add_test(NAME test_campplus_golden_recompute COMMAND test_campplus_golden
         ${CMAKE_CURRENT_SOURCE_DIR}/golden/campplus_golden.h5 1)
set_tests_properties(test_campplus_golden_recompute PROPERTIES LABELS unit)
add_test(NAME test_campplus_golden_direct COMMAND test_campplus_golden
         ${CMAKE_CURRENT_SOURCE_DIR}/golden/campplus_golden.h5 0 direct)
set_tests_properties(test_campplus_golden_direct PROPERTIES LABELS unit)
spk_unit_test(model test_campplus_dense ${CMAKE_CURRENT_SOURCE_DIR}/golden/campplus_dense_golden.h5)
set_tests_properties(test_resnet_model PROPERTIES ENVIRONMENT OMP_NUM_THREADS=1)
# DINO's head, multi-crop loss and teacher on a small ECAPA-TDNN (finite differences).
spk_unit_test(model test_dino)
set_tests_properties(test_dino PROPERTIES ENVIRONMENT OMP_NUM_THREADS=1)
