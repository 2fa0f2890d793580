# Included after llama.cpp's project() call (CMAKE_PROJECT_INCLUDE, set by scripts/setup.sh).
# llama-cpp-python forces LLAMA_BUILD_COMMON on, which builds llama.cpp's `common` library and
# the HTTP client it needs (cpp-httplib): about half of the build's compile time, for a library
# the Python binding never loads (it loads libllama, libggml and, with LLaVA, libmtmd). Turned
# off here, inside llama.cpp's own project, after the binding's setting.
#
# libllama (the model loader, the 157 architectures' graph builders, the tokenizer, sampler,
# grammar and KV cache) is compiled at -O1 rather than the release -O3; ggml, where a model's
# arithmetic runs, keeps -O3. libllama was 107 of the build's 153 compiler-seconds; at -O1 it
# took 74, and the build 61 s against 79 s on 2 cores (AMD EPYC, ninja -j2). A 2,397-token JSON
# schema call of SmolLM2 took the same time on both (14.3 and 14.7 s for the prompt, 1.06 s
# for a second call's grammar-constrained 45 tokens); at -O0 that second call took 2.36 s.
if(PROJECT_NAME STREQUAL "llama.cpp")
  set(LLAMA_BUILD_COMMON OFF CACHE BOOL "llama: build common utils library" FORCE)
  # Deferred to the end of llama.cpp's top-level directory, where the `llama` target exists.
  # GCC and Clang take the last -O on the line: the target's options come after the release flags.
  cmake_language(DEFER DIRECTORY "${CMAKE_CURRENT_SOURCE_DIR}" CALL _vidagent_lean_llama)
  function(_vidagent_lean_llama)
    if(TARGET llama AND NOT MSVC)
      target_compile_options(llama PRIVATE -O1)
    endif()
  endfunction()
endif()
