#!/usr/bin/env bash
# The targets of the integer program read the program and nothing else:
# every #include "..." of src/codegen/, src/onnx/ and src/tflite/ names a
# header of the same folder, the generated qat_onnx.pb-c.h or schema_generated.h,
# or one of qat/core.h, qat/runtime.h, qat/codegen.h, qat/onnx.h,
# qat/tflite.h, or (src/codegen only)
# runtime/qk.h, the integer kernels the generated C ships, which include
# nothing of qat (checked here too), and runtime/plan_rules.h, the memory
# plan's rules, which include only qat/runtime.h (checked); those public headers include
# only qat/core.h and qat/runtime.h (and runtime.h only core.h); no file
# there includes HDF5 or BLAS. (Their link against the runtime alone is
# checked by test_codegen_program.) Prints each offending line.
#   include_graph.sh SOURCE_DIR
set -euo pipefail
src=${1:?usage: include_graph.sh SOURCE_DIR}
bad=0
allowed_public='^(qat/core\.h|qat/runtime\.h|qat/codegen\.h|qat/onnx\.h|qat/tflite\.h)$'
for folder in src/codegen src/onnx src/tflite; do
  for f in "$src/$folder"/*.[ch] "$src/$folder"/*.cc; do
    [ -f "$f" ] || continue
    while IFS= read -r line; do
      inc=$(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' <<< "$line")
      sys=$(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*<\([^>]*\)>.*/\1/p' <<< "$line")
      if [ -n "$inc" ]; then
        if [[ $inc =~ $allowed_public ]] || [ "$inc" = qat_onnx.pb-c.h ] || [ "$inc" = schema_generated.h ] || { [ $folder = src/codegen ] && { [ "$inc" = runtime/qk.h ] || [ "$inc" = runtime/plan_rules.h ]; }; } || { [[ $inc != */* ]] && [ -f "$src/$folder/$inc" ]; }; then
          continue
        fi
        echo "${f#$src/}: $line"; bad=1
      elif [[ $sys == hdf5* || $sys == cblas* ]]; then
        echo "${f#$src/}: $line"; bad=1
      fi
    done < <(grep -E '^[[:space:]]*#[[:space:]]*include' "$f")
  done
done
if grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$src/src/runtime/qk.h"; then
  echo "src/runtime/qk.h: includes a header of qat (it is shipped alone into generated C)"; bad=1
fi
while IFS= read -r inc; do
  [ "$inc" = qat/runtime.h ] || { echo "src/runtime/plan_rules.h: #include \"$inc\" (it may read the program only)"; bad=1; }
done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$src/src/runtime/plan_rules.h")
for h in codegen onnx tflite runtime; do
  want='^(qat/core\.h|qat/runtime\.h)$'
  [ $h = runtime ] && want='^qat/core\.h$'
  while IFS= read -r inc; do
    [[ $inc =~ $want ]] || { echo "include/qat/$h.h: #include \"$inc\""; bad=1; }
  done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$src/include/qat/$h.h")
done
[ $bad = 0 ] && echo "include graph: src/codegen, src/onnx and src/tflite read core and the program only"
exit $bad
