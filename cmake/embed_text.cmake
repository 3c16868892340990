# Writes OUT, a C file defining `const unsigned char NAME[]` with the bytes of IN
# (NUL-terminated) and `const unsigned long NAME_len` (without the NUL):
# the C generator's copy of src/runtime/qk.h, made at build time.
file(READ "${IN}" hex HEX)
string(LENGTH "${hex}" n)
math(EXPR n "${n} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")

file(WRITE "${OUT}" "/* generated from ${IN} by cmake/embed_text.cmake: do not edit */\n"
  "extern const unsigned char ${NAME}[];\nextern const unsigned long ${NAME}_len;\n"
  "const unsigned char ${NAME}[] = {\n${bytes}0};\nconst unsigned long ${NAME}_len = ${n};\n")
