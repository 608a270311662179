# cmake/cuda_headers.cmake: where the CUDA hooks' headers come from.
#
# The CUDA hooks of libtidemark_preload.so need cuda.h, cudaTypedefs.h and
# cuda_runtime_api.h of CUDA 12.0 or later, in one folder.  GPU machines
# have them in many places, so the first folder that holds all three wins,
# in this order:
#   1. TDM_CUDA_INCLUDE_DIR, when given (-D) or found by an earlier run;
#   2. CUDAToolkit_ROOT (the CMake variable, then the environment's),
#      CUDA_HOME, CUDA_PATH, CUDA_ROOT: ROOT/include;
#   3. CMake's FindCUDAToolkit (nvcc on PATH, ...; not in script mode);
#   4. TDM_CUDA_DEFAULT_ROOTS (default /usr/local/cuda): ROOT/include;
#   5. a pip-installed runtime (nvidia/cu13/include, nvidia/cu12/include,
#      nvidia/cuda_runtime/include) in the site-packages of TDM_VENV_PYTHON,
#      $VIRTUAL_ENV's python, then python3 on PATH;
#   6. the compiler's system folders (/usr/include: Debian's
#      nvidia-cuda-toolkit; not in script mode).
# A folder with headers older than 12.0 is passed over (its CUDART_VERSION
# is read from cuda_runtime_api.h).
#
# tdm_find_cuda_headers() sets, in the caller's scope:
#   TDM_CUDA_INCLUDE_DIR     the folder (cached), or TDM_CUDA_INCLUDE_DIR-NOTFOUND
#   TDM_CUDA_HEADER_VERSION  its CUDART_VERSION (12040 for 12.4), or empty
#   TDM_CUDA_HEADER_SOURCE   which of the above found it
#   TDM_CUDA_HEADER_LOOKED   where it looked, for the message of a build
#                            without them
# Script mode (cmake -P) runs steps 1, 2, 4 and 5: tests/cmake checks the
# order with made-up folders.

# VAR <- CUDART_VERSION of the headers in DIR, empty when they are not all there.
function(tdm_cuda_headers_version dir var)
  set(${var} "" PARENT_SCOPE)
  foreach(h cuda.h cudaTypedefs.h cuda_runtime_api.h)
    if(NOT EXISTS "${dir}/${h}")
      return()
    endif()
  endforeach()
  file(STRINGS "${dir}/cuda_runtime_api.h" line REGEX "^#define[ \t]+CUDART_VERSION[ \t]+[0-9]+")
  if(line MATCHES "CUDART_VERSION[ \t]+([0-9]+)")
    set(${var} "${CMAKE_MATCH_1}" PARENT_SCOPE)
  endif()
endfunction()

# OUT <- the site-packages folders of the Python interpreters named above.
function(tdm_cuda_pip_site_dirs out)
  set(pythons "")
  if(TDM_VENV_PYTHON)
    list(APPEND pythons "${TDM_VENV_PYTHON}")
  endif()
  if(DEFINED ENV{VIRTUAL_ENV})
    list(APPEND pythons "$ENV{VIRTUAL_ENV}/bin/python")
  endif()
  # The first python3 on PATH (by hand: find_program caches, and its
  # NO_CACHE needs CMake 3.21).
  string(REPLACE ":" ";" path_dirs "$ENV{PATH}")
  foreach(dir IN LISTS path_dirs)
    if(dir AND EXISTS "${dir}/python3" AND NOT IS_DIRECTORY "${dir}/python3")
      list(APPEND pythons "${dir}/python3")
      break()
    endif()
  endforeach()
  set(sites "")
  foreach(py IN LISTS pythons)
    if(EXISTS "${py}")
      execute_process(COMMAND "${py}" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])"
                      OUTPUT_VARIABLE site OUTPUT_STRIP_TRAILING_WHITESPACE
                      RESULT_VARIABLE rc ERROR_QUIET TIMEOUT 30)
      if(rc EQUAL 0 AND site)
        list(APPEND sites "${site}")
      endif()
    endif()
  endforeach()
  list(REMOVE_DUPLICATES sites)
  set(${out} "${sites}" PARENT_SCOPE)
endfunction()

function(tdm_find_cuda_headers)
  set(looked "")
  set(found "")
  set(version "")
  set(source "")
  # try(DIR SOURCE): takes DIR when nothing was taken yet and it qualifies.
  macro(tdm_cuda_try dir what)
    if(NOT found AND NOT "${dir}" STREQUAL "")
      tdm_cuda_headers_version("${dir}" v)
      if(v AND v GREATER_EQUAL 12000)
        set(found "${dir}")
        set(version "${v}")
        set(source "${what}")
      elseif(v)
        math(EXPR major "${v} / 1000")
        math(EXPR minor "${v} % 1000 / 10")
        list(APPEND looked "${dir} (CUDA ${major}.${minor}: older than 12.0)")
      else()
        list(APPEND looked "${dir}")
      endif()
    endif()
  endmacro()

  if(TDM_CUDA_INCLUDE_DIR)
    tdm_cuda_try("${TDM_CUDA_INCLUDE_DIR}" "TDM_CUDA_INCLUDE_DIR")
    if(NOT found)
      message(WARNING "tidemark: TDM_CUDA_INCLUDE_DIR=${TDM_CUDA_INCLUDE_DIR} does not hold "
                      "cuda.h, cudaTypedefs.h and cuda_runtime_api.h of CUDA 12.0 or later; "
                      "looking elsewhere")
    endif()
  endif()
  set(roots_set 0)
  foreach(var CUDAToolkit_ROOT ENV{CUDAToolkit_ROOT} ENV{CUDA_HOME} ENV{CUDA_PATH} ENV{CUDA_ROOT})
    if(var MATCHES "^ENV{(.*)}$")
      set(name "${CMAKE_MATCH_1}")
      set(root "$ENV{${name}}")
    else()
      set(name "${var}")
      set(root "${${var}}")
    endif()
    if(root)
      set(roots_set 1)
      tdm_cuda_try("${root}/include" "${name}")
    endif()
  endforeach()
  if(NOT roots_set)
    list(APPEND looked "CUDAToolkit_ROOT, CUDA_HOME, CUDA_PATH, CUDA_ROOT (none set)")
  endif()
  if(NOT found AND NOT CMAKE_SCRIPT_MODE_FILE)
    find_package(CUDAToolkit QUIET)
    if(CUDAToolkit_FOUND)
      foreach(dir IN LISTS CUDAToolkit_INCLUDE_DIRS)
        tdm_cuda_try("${dir}" "CMake's CUDAToolkit")
      endforeach()
    else()
      list(APPEND looked "CMake's CUDAToolkit (not found)")
    endif()
  endif()
  if(NOT DEFINED TDM_CUDA_DEFAULT_ROOTS)
    set(TDM_CUDA_DEFAULT_ROOTS /usr/local/cuda)
  endif()
  foreach(root IN LISTS TDM_CUDA_DEFAULT_ROOTS)
    tdm_cuda_try("${root}/include" "${root}")
  endforeach()
  if(NOT found)
    tdm_cuda_pip_site_dirs(sites)
    foreach(site IN LISTS sites)
      foreach(wheel cu13 cu12 cuda_runtime)
        tdm_cuda_try("${site}/nvidia/${wheel}/include" "pip's nvidia/${wheel}")
      endforeach()
    endforeach()
    if(NOT sites)
      list(APPEND looked "pip's nvidia/*/include (no Python to ask)")
    endif()
  endif()
  if(NOT found AND NOT CMAKE_SCRIPT_MODE_FILE)
    find_path(TDM_CUDA_SYSTEM_DIR cuda.h)
    set(system_dir "${TDM_CUDA_SYSTEM_DIR}")
    unset(TDM_CUDA_SYSTEM_DIR CACHE) # asked again at the next run
    if(system_dir)
      tdm_cuda_try("${system_dir}" "the system's include folders")
    else()
      list(APPEND looked "the system's include folders")
    endif()
  endif()

  if(found)
    set(TDM_CUDA_INCLUDE_DIR "${found}" CACHE PATH
        "Folder of cuda.h, cudaTypedefs.h, cuda_runtime_api.h (CUDA 12.0+) for the CUDA hooks" FORCE)
  else()
    set(TDM_CUDA_INCLUDE_DIR "TDM_CUDA_INCLUDE_DIR-NOTFOUND" CACHE PATH
        "Folder of cuda.h, cudaTypedefs.h, cuda_runtime_api.h (CUDA 12.0+) for the CUDA hooks" FORCE)
  endif()
  list(REMOVE_DUPLICATES looked)
  string(REPLACE ";" ", " looked "${looked}")
  set(TDM_CUDA_INCLUDE_DIR "${TDM_CUDA_INCLUDE_DIR}" PARENT_SCOPE)
  set(TDM_CUDA_HEADER_VERSION "${version}" PARENT_SCOPE)
  set(TDM_CUDA_HEADER_SOURCE "${source}" PARENT_SCOPE)
  set(TDM_CUDA_HEADER_LOOKED "${looked}" PARENT_SCOPE)
endfunction()
