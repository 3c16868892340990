# ONNX export (src/onnx): the wire format is protobuf, written with the
# protobuf-c runtime from C code that protoc-c generates at build time
# from the onnx.proto schema Debian's python3-onnx installs. Nothing
# generated is committed: the schema is the contract, and the generated
# code follows whichever protobuf-c the machine has.
#
# QAT_ONNX=AUTO turns the export on when all three are found, ON makes
# them required, OFF builds src/onnx/disabled.c (every call says the
# build has no ONNX support). Sets QAT_HAVE_ONNX, QAT_PC_ONNX_LIBS and,
# when on, the object library qat_onnx_proto (the generated code).
set(QAT_HAVE_ONNX OFF)
set(QAT_PC_ONNX_LIBS "")
if(NOT QAT_ONNX STREQUAL "OFF")
  find_package(PkgConfig QUIET)
  if(PKG_CONFIG_FOUND)
    pkg_check_modules(QAT_PROTOBUF_C QUIET IMPORTED_TARGET libprotobuf-c)
  endif()
  find_program(QAT_PROTOC_C protoc-c)
  # Debian's python3-onnx first; QAT_ONNX_PROTO=/path/onnx.proto overrides.
  find_file(QAT_ONNX_PROTO onnx.proto
    PATHS /usr/lib/python3/dist-packages/onnx /usr/share/onnx /usr/include/onnx
    NO_DEFAULT_PATH)
  set(_missing "")
  if(NOT QAT_PROTOBUF_C_FOUND)
    list(APPEND _missing "libprotobuf-c (libprotobuf-c-dev)")
  endif()
  if(NOT QAT_PROTOC_C)
    list(APPEND _missing "protoc-c (protobuf-c-compiler)")
  endif()
  if(NOT QAT_ONNX_PROTO)
    list(APPEND _missing "onnx.proto (python3-onnx)")
  endif()
  if(_missing)
    string(REPLACE ";" ", " _missing "${_missing}")
    if(QAT_ONNX STREQUAL "ON")
      message(FATAL_ERROR "QAT_ONNX=ON, but not found: ${_missing}")
    endif()
    message(STATUS "ONNX export: off (not found: ${_missing}; scripts/setup-deps.sh installs them)")
  else()
    set(QAT_HAVE_ONNX ON)
    set(QAT_PC_ONNX_LIBS "-lprotobuf-c")
    message(STATUS "ONNX export: on (${QAT_ONNX_PROTO}, protobuf-c ${QAT_PROTOBUF_C_VERSION})")
    set(_gen ${CMAKE_BINARY_DIR}/generated/onnx)
    file(MAKE_DIRECTORY ${_gen})
    # The schema's package renamed to qat.onnx: protoc-c then names its C
    # symbols qat__onnx__* (the library's private prefix), so a program
    # that links its own onnx.pb-c next to a static libqat does not clash.
    # A package name is not on the wire: the files written are the same.
    file(READ ${QAT_ONNX_PROTO} _schema)
    string(REGEX REPLACE "\npackage onnx;" "\npackage qat.onnx;" _schema "${_schema}")
    if(NOT _schema MATCHES "\npackage qat.onnx;")
      message(FATAL_ERROR "${QAT_ONNX_PROTO}: no 'package onnx;' line to rename")
    endif()
    file(WRITE ${_gen}/qat_onnx.proto.new "${_schema}")
    configure_file(${_gen}/qat_onnx.proto.new ${_gen}/qat_onnx.proto COPYONLY) # rewritten only when it changes
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${QAT_ONNX_PROTO})
    add_custom_command(
      OUTPUT ${_gen}/qat_onnx.pb-c.c ${_gen}/qat_onnx.pb-c.h
      COMMAND ${QAT_PROTOC_C} --proto_path=${_gen} --c_out=${_gen} ${_gen}/qat_onnx.proto
      DEPENDS ${_gen}/qat_onnx.proto
      COMMENT "protoc-c: ${QAT_ONNX_PROTO} as package qat.onnx"
      VERBATIM)
    # Generated code: not held to the project's warning flags, and its
    # symbols stay inside libqat (hidden).
    add_library(qat_onnx_proto OBJECT ${_gen}/qat_onnx.pb-c.c)
    set_target_properties(qat_onnx_proto PROPERTIES POSITION_INDEPENDENT_CODE ON C_VISIBILITY_PRESET hidden)
    target_include_directories(qat_onnx_proto PUBLIC ${_gen})
    target_link_libraries(qat_onnx_proto PUBLIC PkgConfig::QAT_PROTOBUF_C)
    if(QAT_SANITIZE)
      target_compile_options(qat_onnx_proto PRIVATE -fsanitize=address,undefined -fno-omit-frame-pointer)
    endif()
  endif()
endif()
