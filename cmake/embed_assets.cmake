# Writes OUT: a C file holding the chat page's assets (server/http.c serves
# them under /assets/NAME). Invoked at build time with -DOUT= and
# -DASSETS="NAME=FILE[+FILE...]|NAME=..." (entries split by |, files
# concatenated in order: a notice file first where a library's own file has
# none). The table is srv_asset_sources (srv_asset_source: name, data, len),
# srv_asset_nsources entries.
set(body "#include <stddef.h>\ntypedef struct { const char *name; const unsigned char *data; size_t len; } srv_asset_source;\n")
set(table "")
set(count 0)
string(REPLACE "|" ";" entries "${ASSETS}")
foreach(entry IN LISTS entries)
  if(entry STREQUAL "")
    continue()
  endif()
  string(FIND "${entry}" "=" eq)
  string(SUBSTRING "${entry}" 0 ${eq} name)
  math(EXPR from "${eq} + 1")
  string(SUBSTRING "${entry}" ${from} -1 files)
  string(REPLACE "+" ";" files "${files}")
  set(hex "")
  foreach(f IN LISTS files)
    file(READ "${f}" h HEX)
    string(APPEND hex "${h}")
  endforeach()
  string(LENGTH "${hex}" hexlen)
  math(EXPR len "${hexlen} / 2")
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
  string(APPEND body "static const unsigned char asset_${count}[] = {${bytes}0};\n")
  string(APPEND table "  {\"${name}\", asset_${count}, ${len}},\n")
  math(EXPR count "${count} + 1")
endforeach()
string(APPEND body "const srv_asset_source srv_asset_sources[] = {\n${table}  {0, 0, 0}\n};\nconst int srv_asset_nsources = ${count};\n")
file(WRITE "${OUT}.tmp" "${body}")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
