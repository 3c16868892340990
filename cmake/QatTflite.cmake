# TFLite export (src/tflite): the format is a FlatBuffers buffer, built
# with the C++ builder and verifier that Debian's flatc generates at build
# time from src/tflite/schema.fbs (the part of TFLite's schema qat writes).
# Nothing generated is committed. The one C++ file, src/tflite/write.cc,
# sits behind a C function; the rest of the module is C.
#
# QAT_TFLITE=AUTO turns the export on when flatc (flatbuffers-compiler),
# the headers (libflatbuffers-dev) and a C++ compiler are found, ON makes
# them required, OFF builds src/tflite/disabled.c (every call says the
# build has no TFLite support). Sets QAT_HAVE_TFLITE and QAT_PC_TFLITE_LIBS.
set(QAT_HAVE_TFLITE OFF)
set(QAT_PC_TFLITE_LIBS "")
if(NOT QAT_TFLITE STREQUAL "OFF")
  find_program(QAT_FLATC flatc)
  find_path(QAT_FLATBUFFERS_INCLUDE flatbuffers/flatbuffers.h)
  include(CheckLanguage)
  check_language(CXX)
  set(_missing "")
  if(NOT QAT_FLATC)
    list(APPEND _missing "flatc (flatbuffers-compiler)")
  endif()
  if(NOT QAT_FLATBUFFERS_INCLUDE)
    list(APPEND _missing "flatbuffers headers (libflatbuffers-dev)")
  endif()
  if(NOT CMAKE_CXX_COMPILER)
    list(APPEND _missing "a C++ compiler (g++)")
  endif()
  if(_missing)
    string(REPLACE ";" ", " _missing "${_missing}")
    if(QAT_TFLITE STREQUAL "ON")
      message(FATAL_ERROR "QAT_TFLITE=ON, but not found: ${_missing}")
    endif()
    message(STATUS "TFLite export: off (not found: ${_missing}; scripts/setup-deps.sh installs them)")
  else()
    enable_language(CXX)
    set(QAT_HAVE_TFLITE ON)
    set(QAT_PC_TFLITE_LIBS "-lstdc++")
    execute_process(COMMAND ${QAT_FLATC} --version OUTPUT_VARIABLE _v OUTPUT_STRIP_TRAILING_WHITESPACE)
    message(STATUS "TFLite export: on (${_v})")
    set(_gen ${CMAKE_BINARY_DIR}/generated/tflite)
    set(_fbs ${PROJECT_SOURCE_DIR}/src/tflite/schema.fbs)
    file(MAKE_DIRECTORY ${_gen})
    add_custom_command(
      OUTPUT ${_gen}/schema_generated.h
      COMMAND ${QAT_FLATC} --cpp -o ${_gen} ${_fbs}
      DEPENDS ${_fbs}
      COMMENT "flatc: ${_fbs}"
      VERBATIM)
    add_custom_target(qat_tflite_schema DEPENDS ${_gen}/schema_generated.h)
  endif()
endif()
