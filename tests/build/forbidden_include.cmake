# tests/build/forbidden_include.cmake: the one-way flow of the layers is
# the build's, not a convention (CMakeLists.txt, "the core, by layer").
#
# For each case below, a copy of one file of a layer is compiled with
# exactly the command the build gives that file (compile_commands.json):
#   1. the copy as it is must compile (else the check proves nothing);
#   2. with an include of a header of a layer above it (or of a sibling)
#      added after its own includes, it must fail, and fail because that
#      header is not found;
#   3. the same, with the header's own folder added to the command, must
#      compile: the header exists and it is only the layering that keeps
#      it out.
#
# cmake -DTDM_SOURCE_DIR=... -DTDM_BINARY_DIR=... -DWORK_DIR=... -P this
#
# A case: TARGET|FILE|HEADER|FOLDER OF THE HEADER|needed or optional
# (optional: the target is built only where a vendor's headers are).
set(cases
  "tdm_base_objects|base/clock.c|snap_model.h|format|needed"
  "tdm_format_objects|format/format_write.c|recorder.h|snapshot|needed"
  "tdm_symbolize_objects|symbolize/symbolize.c|ring.h|snapshot|needed"
  "tdm_recorder_objects|snapshot/ring.c|alloc.h|alloc|needed"
  "tdm_alloc_objects|alloc/alloc.c|config.h|runtime|needed"
  "tdm_runtime_objects|runtime/config.c|vmm_track.h|hooks/track|needed"
  "tidemark_preload|hooks/track/vmm_track.c|pool_track.h|hooks/preload|optional"
  "tidemark_ze_shim|hooks/ze_shim/ze_shim.c|pool_track.h|hooks/preload|optional"
  "tdm_model|viewer-export/model/model.c|recorder.h|snapshot|needed"
  "tidemark_cli|viewer-export/cli/cli_main.c|replay_save.h|runtime|needed")

foreach(v TDM_SOURCE_DIR TDM_BINARY_DIR WORK_DIR)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "forbidden_include: -D${v}=... is required")
  endif()
endforeach()
set(db ${TDM_BINARY_DIR}/compile_commands.json)
if(NOT EXISTS ${db})
  message(FATAL_ERROR "forbidden_include: no ${db} (CMAKE_EXPORT_COMPILE_COMMANDS is on in "
                      "CMakeLists.txt; a generator without it cannot run this check)")
endif()
file(READ ${db} json)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})

# The compile command of each case's file as its target builds it: one pass
# over the database (each string(JSON) call parses the whole text again).
string(JSON count LENGTH "${json}")
math(EXPR last "${count} - 1")
foreach(i RANGE ${last})
  string(JSON entry GET "${json}" ${i})
  string(JSON file GET "${entry}" file)
  string(JSON command GET "${entry}" command)
  set(n 0)
  foreach(c ${cases})
    string(REPLACE "|" ";" f "${c}")
    list(GET f 0 target)
    list(GET f 1 src)
    # The target is the one whose object folder the command writes to.
    if(file STREQUAL "${TDM_SOURCE_DIR}/${src}" AND command MATCHES " -o [^ ]*CMakeFiles/${target}\\.dir/")
      set(cmd_${n} "${command}")
      string(JSON dir_${n} GET "${entry}" directory)
    endif()
    math(EXPR n "${n} + 1")
  endforeach()
endforeach()

# compile(RESULT OUTPUT COMMAND DIR SOURCE [EXTRA FLAGS...]): COMMAND with
# its source replaced by SOURCE, checked without an object.
function(compile result_var output_var command dir source)
  separate_arguments(args UNIX_COMMAND "${command}")
  set(kept "")
  set(skip OFF)
  foreach(a ${args})
    if(skip)
      set(skip OFF)
    elseif(a STREQUAL "-o" OR a STREQUAL "-c")
      set(skip ON)
    elseif(a MATCHES "\\.c$")
      # the source file itself, wherever it stands
    else()
      list(APPEND kept "${a}")
    endif()
  endforeach()
  # Only the front end runs (-fsyntax-only): the includes are resolved
  # and the file type-checked, which is all a case asks; code generation
  # at -O3 -g took 95% of the check's time.
  execute_process(COMMAND ${kept} ${ARGN} -fsyntax-only ${source}
                  WORKING_DIRECTORY ${dir} RESULT_VARIABLE rc
                  OUTPUT_VARIABLE out ERROR_VARIABLE out)
  set(${result_var} ${rc} PARENT_SCOPE)
  set(${output_var} "${out}" PARENT_SCOPE)
endfunction()

set(failed 0)
set(checked 0)
set(n 0)
foreach(c ${cases})
  string(REPLACE "|" ";" f "${c}")
  list(GET f 0 target)
  list(GET f 1 src)
  list(GET f 2 header)
  list(GET f 3 header_dir)
  list(GET f 4 need)
  set(name "${src} + \"${header}\" (${target})")
  if(NOT DEFINED cmd_${n})
    if(need STREQUAL "needed")
      message(SEND_ERROR "${name}: the build has no compile command for it")
      math(EXPR failed "${failed} + 1")
    else()
      message(STATUS "${name}: not built in this configuration, not checked")
    endif()
    math(EXPR n "${n} + 1")
    continue()
  endif()
  if(NOT EXISTS ${TDM_SOURCE_DIR}/${header_dir}/${header})
    message(SEND_ERROR "${name}: ${header_dir}/${header} does not exist; the case names nothing")
    math(EXPR failed "${failed} + 1")
    math(EXPR n "${n} + 1")
    continue()
  endif()
  # The copy keeps the file's name in a folder of its own.
  get_filename_component(base ${src} NAME)
  set(case_dir ${WORK_DIR}/${n})
  file(MAKE_DIRECTORY ${case_dir})
  set(plain ${case_dir}/${base})
  set(bad ${case_dir}/with_include_${base})
  file(READ ${TDM_SOURCE_DIR}/${src} text)
  file(WRITE ${plain} "${text}")
  # The added include goes after the file's last include of a header: an
  # X-macro table (`#include "vendors.def"`) is included inside a body.
  string(REGEX MATCHALL "\n#[ \t]*include[ \t]*[<\"][^\n]*\\.h[>\"]" includes "\n${text}")
  list(GET includes -1 last_include)
  string(REGEX REPLACE "^\n" "" last_include "${last_include}")
  string(FIND "${text}" "${last_include}" at REVERSE)
  string(LENGTH "${last_include}" len)
  math(EXPR at "${at} + ${len}")
  string(SUBSTRING "${text}" 0 ${at} head)
  string(SUBSTRING "${text}" ${at} -1 tail)
  file(WRITE ${bad} "${head}\n#include \"${header}\" /* against the flow */${tail}")

  compile(rc out "${cmd_${n}}" "${dir_${n}}" ${plain})
  if(NOT rc EQUAL 0)
    message(SEND_ERROR "${name}: the unmodified copy does not compile with the build's command:\n${out}")
    math(EXPR failed "${failed} + 1")
    math(EXPR n "${n} + 1")
    continue()
  endif()
  compile(rc out "${cmd_${n}}" "${dir_${n}}" ${bad})
  string(REPLACE "." "\\." header_re "${header}")
  if(rc EQUAL 0)
    message(SEND_ERROR "${name}: compiles; ${target} sees ${header_dir}/, a layer it must not")
    math(EXPR failed "${failed} + 1")
  elseif(NOT out MATCHES "(${header_re}: No such file or directory|'${header_re}' file not found)")
    message(SEND_ERROR "${name}: fails, but not for want of ${header}:\n${out}")
    math(EXPR failed "${failed} + 1")
  else()
    compile(rc out "${cmd_${n}}" "${dir_${n}}" ${bad} -I${TDM_SOURCE_DIR}/${header_dir})
    if(NOT rc EQUAL 0)
      message(SEND_ERROR "${name}: fails even with ${header_dir}/ added, so the case proves "
                         "nothing of the layering:\n${out}")
      math(EXPR failed "${failed} + 1")
    else()
      message(STATUS "${name}: refused (${header} not found), as it must be")
      math(EXPR checked "${checked} + 1")
    endif()
  endif()
  math(EXPR n "${n} + 1")
endforeach()
if(failed GREATER 0)
  message(FATAL_ERROR "forbidden_include: ${failed} case(s) failed, ${checked} passed")
endif()
message(STATUS "forbidden_include: ${checked} include(s) against the flow refused")
