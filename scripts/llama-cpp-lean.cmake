# Included after llama.cpp's project() call (CMAKE_PROJECT_INCLUDE, set by scripts/setup.sh).
# llama-cpp-python forces LLAMA_BUILD_COMMON on, which builds llama.cpp's `common` library and
# the HTTP client it needs (cpp-httplib): about half of the build's compile time, for a library
# the Python binding never loads (it loads libllama, libggml and, with LLaVA, libmtmd). Turned
# off here, inside llama.cpp's own project, after the binding's setting.
if(PROJECT_NAME STREQUAL "llama.cpp")
  set(LLAMA_BUILD_COMMON OFF CACHE BOOL "llama: build common utils library" FORCE)
endif()
