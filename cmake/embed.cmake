# Writes OUT: a C file holding every file DIR/GLOB as a byte array (NUL
# appended), so the library is self-contained: the OpenCL kernels (cl/*.cl)
# and the model catalogue (models/catalogue.tsv). Invoked at build time with
# -DOUT= -DDIR= -DGLOB= -DSYMBOL=; the table is SYMBOL_sources (type
# SYMBOL_source: name without extension, data, len), SYMBOL_nsources entries.
file(GLOB SOURCES "${DIR}/${GLOB}")
list(SORT SOURCES)
set(body "#include <stddef.h>\ntypedef struct { const char *name; const unsigned char *data; size_t len; } ${SYMBOL}_source;\n")
set(table "")
set(count 0)
foreach(src IN LISTS SOURCES)
  get_filename_component(name "${src}" NAME_WE)
  file(READ "${src}" hex HEX)
  string(LENGTH "${hex}" hexlen)
  math(EXPR len "${hexlen} / 2")
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
  string(APPEND body "static const unsigned char src_${name}[] = {${bytes}0};\n")
  string(APPEND table "  {\"${name}\", src_${name}, ${len}},\n")
  math(EXPR count "${count} + 1")
endforeach()
string(APPEND body "const ${SYMBOL}_source ${SYMBOL}_sources[] = {\n${table}  {0, 0, 0}\n};\nconst int ${SYMBOL}_nsources = ${count};\n")
file(WRITE "${OUT}.tmp" "${body}")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
