# libtidemark_ze_shim.so (hooks/ze_shim/): the Level Zero shim driver, for
# ZE_ENABLE_ALT_DRIVERS.  It shares the booking code of the preload's
# Level Zero hooks (hooks/track/ze_track.c, built again here with
# TDM_ZE_SHIM: its own recursion guard) and links libtidemark.so.  Its
# exports are exactly the 53 zeGet*/zetGet*/zesGet* table getters
# (default visibility in the source; everything else is hidden).
# Only when the Level Zero headers are found.
if(TDM_ZE_INCLUDE_DIR)
  add_library(tidemark_ze_shim SHARED ${PROJECT_SOURCE_DIR}/hooks/ze_shim/ze_shim.c
                                      ${PROJECT_SOURCE_DIR}/hooks/track/ze_track.c
                                      ${PROJECT_SOURCE_DIR}/hooks/track/vmm_track.c)
  target_include_directories(tidemark_ze_shim SYSTEM PRIVATE ${TDM_ZE_INCLUDE_DIR})
  target_compile_definitions(tidemark_ze_shim PRIVATE TDM_ZE_SHIM=1 TDM_HAVE_ZE=1)
  target_link_libraries(tidemark_ze_shim PRIVATE tdm_hooks_track_headers tidemark Threads::Threads
                        ${CMAKE_DL_LIBS})
  target_link_options(tidemark_ze_shim PRIVATE -Wl,-z,defs)
  install(TARGETS tidemark_ze_shim LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
endif()
