# Note [installed package]: the engine as a library for a user's own program. One target,
# zerotrain::zerotrain, brings every layer a training program uses (core, ops, autograd, nn, optim,
# comm, zero, config, ckpt, data, monitor, and train: Note [train layer]) with their headers; `cmake --install build --prefix P`
# writes the static libraries, the headers under P/include/zt/ and a package config under
# P/lib/cmake/zerotrain/, so `find_package(zerotrain)` with CMAKE_PREFIX_PATH=P works.
# examples/ is such a program, built against an installed prefix by scripts/test.sh.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(ZT_LIBRARY_LAYERS zt_core zt_monitor zt_ops zt_autograd zt_nn zt_optim zt_comm zt_zero zt_ckpt zt_data zt_config zt_train)
add_library(zerotrain_library INTERFACE)
set_target_properties(zerotrain_library PROPERTIES EXPORT_NAME zerotrain)
target_link_libraries(zerotrain_library INTERFACE ${ZT_LIBRARY_LAYERS})
target_compile_features(zerotrain_library INTERFACE cxx_std_20)
add_library(zerotrain::zerotrain ALIAS zerotrain_library)

install(TARGETS zerotrain_library ${ZT_LIBRARY_LAYERS} zt_config_sections zt_safetensors zt_ckpt_format
        EXPORT zerotrainTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
get_property(zt_header_dirs GLOBAL PROPERTY ZT_HEADER_DIRS)
foreach(dir IN LISTS zt_header_dirs)
  install(DIRECTORY ${dir}/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
endforeach()
install(EXPORT zerotrainTargets NAMESPACE zerotrain:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/zerotrain)
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/zerotrainConfig.cmake.in
                              ${CMAKE_CURRENT_BINARY_DIR}/zerotrainConfig.cmake
                              INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/zerotrain)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/zerotrainConfigVersion.cmake VERSION 0.1.0
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/zerotrainConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/zerotrainConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/zerotrain)
