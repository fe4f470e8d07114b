# The fuzz corpus regression runs, for any C compiler (no clang, no libFuzzer
# needed): builds tests/fuzz/run_corpus.c together with each fuzz target and
# the sources it tests, with ASan+UBSan where the compiler has them, and
# registers seven ctest tests:
#
#   fuzz.corpus            tests/fuzz/fuzz_reader.c and the trace reader:
#                          every file of tests/fuzz/corpus/ and
#                          tests/fuzz/regressions/
#   fuzz.workload_corpus   tests/fuzz/fuzz_workload.c and the workload
#                          loader (src/replay/workload.c): every file of
#                          tests/fuzz/corpus_workload/ and
#                          tests/fuzz/regressions_workload/
#   fuzz.smaps_corpus      tests/fuzz/fuzz_smaps.c and the smaps parser and
#                          classification of `heaptrail maps`
#                          (src/analyze/smaps.c, mapkinds.c): every file of
#                          tests/fuzz/corpus_smaps/ and
#                          tests/fuzz/regressions_smaps/
#   fuzz.convert_corpus    tests/fuzz/fuzz_convert.c and the converter
#                          (src/replay/converter.c) with the reader and the
#                          workload loader: every file of
#                          tests/fuzz/corpus_convert/ and
#                          tests/fuzz/regressions_convert/
#   fuzz.perfmap_corpus    tests/fuzz/fuzz_perfmap.c and the perf map
#                          parser (src/symbols/perfmap.c): every file of
#                          tests/fuzz/corpus_perfmap/ and
#                          tests/fuzz/regressions_perfmap/
#   fuzz.suppressions_corpus
#                          tests/fuzz/fuzz_suppressions.c and the leak
#                          suppressions parser of `heaptrail leaks
#                          --suppressions` (src/analyze/suppressions.c):
#                          every file of tests/fuzz/corpus_suppressions/
#                          and tests/fuzz/regressions_suppressions/
#   fuzz.jsonread_corpus   tests/fuzz/fuzz_jsonread.c and the JSON reader
#                          of `heaptrail report --compare`
#                          (src/common/jsonread.c) with the writer
#                          (json.c): every file of
#                          tests/fuzz/corpus_jsonread/ and
#                          tests/fuzz/regressions_jsonread/
#
# Include it from a CMakeLists.txt in which testing is enabled, e.g. in
# tests/CMakeLists.txt:
#
#   include(${PROJECT_SOURCE_DIR}/tests/fuzz/corpus.cmake)
#
# Then `ctest -R fuzz` (about a second each).  Options (cache):
#   HT_FUZZ_NO_SANITIZE      sanitizer checks left out (comma-separated);
#                            empty by default: set it to keep a newly
#                            found report quiet while it is being fixed.
#   HT_FUZZ_STRICT_COUNT     also fail when the reader drops events without
#                            an error or a warning (regressions/logic-*);
#                            ON.
#   HT_FUZZ_VALGRIND         add `fuzz.corpus.valgrind` and
#                            `fuzz.workload_corpus.valgrind`: the same runs,
#                            without sanitizers, under valgrind memcheck,
#                            which sees reads of uninitialised memory that
#                            ASan does not (regressions/uninit-*); OFF by
#                            default (slow).
include_guard(GLOBAL)
include(CheckCSourceCompiles)

set(HT_FUZZ_DIR ${PROJECT_SOURCE_DIR}/tests/fuzz)
set(HT_FUZZ_NO_SANITIZE "" CACHE STRING
  "Sanitizer checks the fuzz corpus run leaves out (none: the known reader issues are fixed)")
option(HT_FUZZ_STRICT_COUNT "fuzz.corpus: fail on events dropped without a message" ON)
option(HT_FUZZ_VALGRIND "Add fuzz.corpus.valgrind (valgrind memcheck over the corpus)" OFF)

set(HT_FUZZ_SOURCES
  ${HT_FUZZ_DIR}/run_corpus.c
  ${HT_FUZZ_DIR}/fuzz_reader.c
  ${PROJECT_SOURCE_DIR}/src/trace/reader.c
  ${PROJECT_SOURCE_DIR}/src/trace/reader_decode.c
  ${PROJECT_SOURCE_DIR}/src/trace/reader_merge.c
  ${PROJECT_SOURCE_DIR}/src/trace/reader_par.c
  ${PROJECT_SOURCE_DIR}/src/trace/modmap.c
  ${PROJECT_SOURCE_DIR}/src/trace/record.c
  ${PROJECT_SOURCE_DIR}/src/trace/columns.c
  ${PROJECT_SOURCE_DIR}/src/trace/kinds.c
  ${PROJECT_SOURCE_DIR}/src/common/util.c)

set(HT_FUZZ_SAN -fsanitize=address,undefined,float-cast-overflow -fno-sanitize-recover=all)
if(HT_FUZZ_NO_SANITIZE)
  list(APPEND HT_FUZZ_SAN -fno-sanitize=${HT_FUZZ_NO_SANITIZE})
endif()
set(CMAKE_REQUIRED_FLAGS "-fsanitize=address,undefined,float-cast-overflow")
set(CMAKE_REQUIRED_LINK_OPTIONS "-fsanitize=address,undefined,float-cast-overflow")
check_c_source_compiles("int main(void) { return 0; }" HT_FUZZ_HAVE_SANITIZERS)
unset(CMAKE_REQUIRED_FLAGS)
unset(CMAKE_REQUIRED_LINK_OPTIONS)
if(NOT HT_FUZZ_HAVE_SANITIZERS)
  message(STATUS "fuzz.corpus: the compiler has no ASan/UBSan; running the corpus without them")
  set(HT_FUZZ_SAN "")
endif()

# the workload loader's run
set(HT_FUZZ_WL_SOURCES
  ${HT_FUZZ_DIR}/run_corpus.c
  ${HT_FUZZ_DIR}/fuzz_workload.c
  ${PROJECT_SOURCE_DIR}/src/replay/workload.c
  ${PROJECT_SOURCE_DIR}/src/common/outfile.c
  ${PROJECT_SOURCE_DIR}/src/common/util.c)

add_executable(ht_fuzz_run_corpus ${HT_FUZZ_SOURCES})
target_include_directories(ht_fuzz_run_corpus PRIVATE
  ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/include)
target_compile_options(ht_fuzz_run_corpus PRIVATE -g -O1 -fno-omit-frame-pointer ${HT_FUZZ_SAN})
target_link_options(ht_fuzz_run_corpus PRIVATE ${HT_FUZZ_SAN})
target_link_libraries(ht_fuzz_run_corpus PRIVATE PkgConfig::ZSTD Threads::Threads m)

add_test(NAME fuzz.corpus
  COMMAND ht_fuzz_run_corpus -t 60 ${HT_FUZZ_DIR}/corpus ${HT_FUZZ_DIR}/regressions)
set(HT_FUZZ_ENV "ASAN_OPTIONS=detect_leaks=1:abort_on_error=0"
  "UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1")
if(HT_FUZZ_STRICT_COUNT)
  list(APPEND HT_FUZZ_ENV "HT_FUZZ_STRICT_COUNT=1")
endif()
set_tests_properties(fuzz.corpus PROPERTIES ENVIRONMENT "${HT_FUZZ_ENV}" TIMEOUT 300
  LABELS "fuzz;analyzers")

add_executable(ht_fuzz_run_wl_corpus ${HT_FUZZ_WL_SOURCES})
target_include_directories(ht_fuzz_run_wl_corpus PRIVATE
  ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/include)
target_compile_options(ht_fuzz_run_wl_corpus PRIVATE -g -O1 -fno-omit-frame-pointer ${HT_FUZZ_SAN})
target_link_options(ht_fuzz_run_wl_corpus PRIVATE ${HT_FUZZ_SAN})
target_link_libraries(ht_fuzz_run_wl_corpus PRIVATE m)
add_test(NAME fuzz.workload_corpus
  COMMAND ht_fuzz_run_wl_corpus -t 60 ${HT_FUZZ_DIR}/corpus_workload
    ${HT_FUZZ_DIR}/regressions_workload)
# No allocation above 2 GiB, as under libFuzzer's -rss_limit_mb=2048: the
# loader's memory must follow the file's size
# (regressions_workload/oom-slot-count-from-header.wl).  Label analyzers
# too: scripts/test.sh runs that label in the ASan build.
set(HT_FUZZ_WL_ENV "ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:max_allocation_size_mb=2048"
  "UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1")
set_tests_properties(fuzz.workload_corpus PROPERTIES ENVIRONMENT "${HT_FUZZ_WL_ENV}" TIMEOUT 300
  LABELS "fuzz;analyzers")

# A corpus run of a parser that needs nothing but its sources: the
# executable TARGET from run_corpus.c and the sources after the test's
# name, the ctest test NAME over tests/fuzz/CORPUS and tests/fuzz/REGRESSIONS.
function(ht_fuzz_corpus_run target name corpus regressions)
  add_executable(${target} ${HT_FUZZ_DIR}/run_corpus.c ${ARGN})
  target_include_directories(${target} PRIVATE
    ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/include)
  target_compile_options(${target} PRIVATE -g -O1 -fno-omit-frame-pointer ${HT_FUZZ_SAN})
  target_link_options(${target} PRIVATE ${HT_FUZZ_SAN})
  add_test(NAME ${name}
    COMMAND ${target} -t 60 ${HT_FUZZ_DIR}/${corpus} ${HT_FUZZ_DIR}/${regressions})
  set_tests_properties(${name} PROPERTIES ENVIRONMENT "${HT_FUZZ_WL_ENV}" TIMEOUT 300
    LABELS "fuzz;analyzers")
endfunction()

# the smaps parser's run (heaptrail maps)
ht_fuzz_corpus_run(ht_fuzz_run_smaps_corpus fuzz.smaps_corpus corpus_smaps regressions_smaps
  ${HT_FUZZ_DIR}/fuzz_smaps.c
  ${PROJECT_SOURCE_DIR}/src/analyze/smaps.c
  ${PROJECT_SOURCE_DIR}/src/analyze/mapkinds.c
  ${PROJECT_SOURCE_DIR}/src/common/json.c
  ${PROJECT_SOURCE_DIR}/src/common/markup.c
  ${PROJECT_SOURCE_DIR}/src/common/util.c)

# the perf map parser's run (the names of a JIT's frames)
ht_fuzz_corpus_run(ht_fuzz_run_perfmap_corpus fuzz.perfmap_corpus corpus_perfmap
  regressions_perfmap ${HT_FUZZ_DIR}/fuzz_perfmap.c ${PROJECT_SOURCE_DIR}/src/symbols/perfmap.c)

# the leak suppressions parser's run (heaptrail leaks --suppressions); its
# stack walk over the made-up tree of stub reader and symbolizer functions
# in fuzz_suppressions.c; tests/fuzz/CMakeLists.txt builds the libFuzzer
# target from the same list
set(HT_FUZZ_SUPPRESSIONS_TESTED
  ${PROJECT_SOURCE_DIR}/src/analyze/suppressions.c
  ${PROJECT_SOURCE_DIR}/src/common/util.c)
ht_fuzz_corpus_run(ht_fuzz_run_suppressions_corpus fuzz.suppressions_corpus
  corpus_suppressions regressions_suppressions ${HT_FUZZ_DIR}/fuzz_suppressions.c
  ${HT_FUZZ_SUPPRESSIONS_TESTED})

# the converter's run (heaptrail convert): the reader, the converter, and
# the loader that checks what it wrote
# what fuzz_convert.c tests (tests/fuzz/CMakeLists.txt builds the libFuzzer
# target from the same list)
set(HT_FUZZ_CONVERT_TESTED
  ${PROJECT_SOURCE_DIR}/src/replay/converter.c
  ${PROJECT_SOURCE_DIR}/src/replay/workload.c
  ${PROJECT_SOURCE_DIR}/src/common/outfile.c
  ${PROJECT_SOURCE_DIR}/src/common/livemap.c
  ${PROJECT_SOURCE_DIR}/src/analyze/analyze.c
  ${PROJECT_SOURCE_DIR}/src/common/json.c
  ${PROJECT_SOURCE_DIR}/src/common/markup.c
  ${PROJECT_SOURCE_DIR}/src/common/util.c
  ${PROJECT_SOURCE_DIR}/src/trace/reader.c
  ${PROJECT_SOURCE_DIR}/src/trace/reader_decode.c
  ${PROJECT_SOURCE_DIR}/src/trace/reader_merge.c
  ${PROJECT_SOURCE_DIR}/src/trace/reader_par.c
  ${PROJECT_SOURCE_DIR}/src/trace/modmap.c
  ${PROJECT_SOURCE_DIR}/src/trace/record.c
  ${PROJECT_SOURCE_DIR}/src/trace/columns.c
  ${PROJECT_SOURCE_DIR}/src/trace/kinds.c)
add_executable(ht_fuzz_run_convert_corpus ${HT_FUZZ_DIR}/run_corpus.c ${HT_FUZZ_DIR}/fuzz_convert.c
  ${HT_FUZZ_CONVERT_TESTED})
target_include_directories(ht_fuzz_run_convert_corpus PRIVATE
  ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/include)
target_compile_options(ht_fuzz_run_convert_corpus PRIVATE -g -O1 -fno-omit-frame-pointer ${HT_FUZZ_SAN})
target_link_options(ht_fuzz_run_convert_corpus PRIVATE ${HT_FUZZ_SAN})
target_link_libraries(ht_fuzz_run_convert_corpus PRIVATE PkgConfig::ZSTD Threads::Threads m)
add_test(NAME fuzz.convert_corpus
  COMMAND ht_fuzz_run_convert_corpus -t 60 ${HT_FUZZ_DIR}/corpus_convert
    ${HT_FUZZ_DIR}/regressions_convert)
set_tests_properties(fuzz.convert_corpus PROPERTIES ENVIRONMENT "${HT_FUZZ_WL_ENV}" TIMEOUT 300
  LABELS "fuzz;analyzers")

# the JSON reader's run (heaptrail report --compare), with the writer it
# writes the trees back with; tests/fuzz/CMakeLists.txt builds the libFuzzer
# target from the same list
set(HT_FUZZ_JSONREAD_TESTED
  ${PROJECT_SOURCE_DIR}/src/common/jsonread.c
  ${PROJECT_SOURCE_DIR}/src/common/json.c
  ${PROJECT_SOURCE_DIR}/src/common/markup.c)
add_executable(ht_fuzz_run_jsonread_corpus ${HT_FUZZ_DIR}/run_corpus.c
  ${HT_FUZZ_DIR}/fuzz_jsonread.c ${HT_FUZZ_JSONREAD_TESTED})
target_include_directories(ht_fuzz_run_jsonread_corpus PRIVATE
  ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/include)
target_compile_options(ht_fuzz_run_jsonread_corpus PRIVATE -g -O1 -fno-omit-frame-pointer ${HT_FUZZ_SAN})
target_link_options(ht_fuzz_run_jsonread_corpus PRIVATE ${HT_FUZZ_SAN})
target_link_libraries(ht_fuzz_run_jsonread_corpus PRIVATE m)
add_test(NAME fuzz.jsonread_corpus
  COMMAND ht_fuzz_run_jsonread_corpus -t 60 ${HT_FUZZ_DIR}/corpus_jsonread
    ${HT_FUZZ_DIR}/regressions_jsonread)
set_tests_properties(fuzz.jsonread_corpus PROPERTIES ENVIRONMENT "${HT_FUZZ_WL_ENV}" TIMEOUT 300
  LABELS "fuzz;analyzers")

if(HT_FUZZ_VALGRIND)
  find_program(HT_VALGRIND valgrind REQUIRED)
  add_executable(ht_fuzz_run_corpus_plain ${HT_FUZZ_SOURCES})
  target_include_directories(ht_fuzz_run_corpus_plain PRIVATE
    ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/include)
  target_compile_options(ht_fuzz_run_corpus_plain PRIVATE -g -O1)
  target_link_libraries(ht_fuzz_run_corpus_plain PRIVATE PkgConfig::ZSTD Threads::Threads m)
  add_test(NAME fuzz.corpus.valgrind
    COMMAND ${HT_VALGRIND} -q --error-exitcode=1 --track-origins=yes
      $<TARGET_FILE:ht_fuzz_run_corpus_plain> -t 300
      ${HT_FUZZ_DIR}/corpus ${HT_FUZZ_DIR}/regressions)
  set_tests_properties(fuzz.corpus.valgrind PROPERTIES TIMEOUT 600 LABELS fuzz)

  add_executable(ht_fuzz_run_wl_corpus_plain ${HT_FUZZ_WL_SOURCES})
  target_include_directories(ht_fuzz_run_wl_corpus_plain PRIVATE
    ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/include)
  target_compile_options(ht_fuzz_run_wl_corpus_plain PRIVATE -g -O1)
  target_link_libraries(ht_fuzz_run_wl_corpus_plain PRIVATE m)
  add_test(NAME fuzz.workload_corpus.valgrind
    COMMAND ${HT_VALGRIND} -q --error-exitcode=1 --track-origins=yes
      $<TARGET_FILE:ht_fuzz_run_wl_corpus_plain> -t 300
      ${HT_FUZZ_DIR}/corpus_workload ${HT_FUZZ_DIR}/regressions_workload)
  set_tests_properties(fuzz.workload_corpus.valgrind PROPERTIES TIMEOUT 600 LABELS fuzz)
endif()
