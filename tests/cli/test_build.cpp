/// @file test_build.cpp
/// @brief Compiler messages are kept, build-system noise is dropped, paths are rewritten.
#include <catch2/catch.hpp>

#include "grade/build.hpp"
#include "grade/symbols.hpp"

TEST_CASE("diagnostics keep nvcc and gcc messages only", "[cpu]") {
  const std::string log =
      "[1/3] Building CUDA object tests/x.cu.o\n"
      "FAILED: tests/x.cu.o\n"
      "/usr/local/cuda/bin/nvcc -forward-unknown-to-host-compiler -O3 -c /b/submission/01/hello.cu -o x.o\n"
      "/b/submission/01/hello.cu(42): error: identifier \"nn\" is undefined\n"
      "    if (i < nn) c[i] = a[i] + b[i];\n"
      "            ^\n"
      "\n"
      "1 error detected in the compilation of \"/b/submission/01/hello.cu\".\n"
      "ninja: build stopped: subcommand failed.\n";
  const std::string d = gpulab::cli::extract_diagnostics(log, {{"/b/submission/01", "/home/me/work"}});
  CHECK(d.find("/home/me/work/hello.cu(42): error: identifier \"nn\" is undefined") != std::string::npos);
  CHECK(d.find("            ^") != std::string::npos);
  CHECK(d.find("1 error detected") != std::string::npos);
  CHECK(d.find("ninja") == std::string::npos);
  CHECK(d.find("FAILED") == std::string::npos);
  CHECK(d.find("-forward-unknown") == std::string::npos);
}

TEST_CASE("diagnostics keep linker errors", "[cpu]") {
  const std::string log =
      "[2/2] Linking CXX executable bin/lab01_sub\n"
      "FAILED: bin/lab01_sub\n"
      "/usr/bin/c++ -O3 x.o -o bin/lab01_sub\n"
      "/usr/bin/ld: test_hello.cpp.o: in function `f':\n"
      "test_hello.cpp:(.text+0x1c): undefined reference to `lab01::saxpy(float, float const*)'\n"
      "collect2: error: ld returned 1 exit status\n";
  const std::string d = gpulab::cli::extract_diagnostics(log);
  CHECK(d.find("undefined reference to `lab01::saxpy") != std::string::npos);
  CHECK(d.find("collect2") != std::string::npos);
}

#include "run/mpi.hpp"

TEST_CASE("mpirun's complaints name the rank and what happened", "[cpu]") {
  using gpulab::cli::launcher_problems;
  CHECK(launcher_problems("mpirun noticed that process rank 1 with PID 0 on node vm exited on signal 9 (Killed).") ==
        std::vector<std::string>{"rank 1 was killed by signal 9 (Killed)"});
  CHECK(launcher_problems("MPI_ABORT was invoked on rank 2 in communicator MPI_COMM_WORLD\nwith errorcode 1.") ==
        std::vector<std::string>{"rank 2 called MPI_Abort"});
  CHECK(launcher_problems("mpirun has exited due to process rank 2 with PID 0 on\nnode vm exiting improperly. There are three reasons") ==
        std::vector<std::string>{"rank 2 exited without calling MPI_Finalize (it returned early or called exit)"});
  // A rank that merely returned a failing exit code is a test failure, not a launcher problem.
  CHECK(launcher_problems("Primary job  terminated normally, but 1 process returned\na non-zero exit code.").empty());
}

#include "grade/diagnose.hpp"

TEST_CASE("ptxas output gives registers and shared memory and spills per kernel", "[cpu]") {
  const std::string log =
      "ptxas info    : 0 bytes gmem\n"
      "ptxas info    : Compiling entry function '_ZN5lab0223histogram_shared_kernelEPKhmPj' for 'sm_75'\n"
      "ptxas info    : Function properties for _ZN5lab0223histogram_shared_kernelEPKhmPj\n"
      "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
      "ptxas info    : Used 12 registers, used 1 barriers, 1024 bytes smem, 376 bytes cmem[0]\n"
      "ptxas info    : Compiling entry function '_Z5spillPf' for 'sm_90'\n"
      "ptxas info    : Function properties for _Z5spillPf\n"
      "    128 bytes stack frame, 64 bytes spill stores, 32 bytes spill loads\n"
      "ptxas info    : Used 255 registers, 360 bytes cmem[0]\n";
  const auto k = gpulab::cli::parse_ptxas(log);
  REQUIRE(k.size() == 2);
  CHECK(k[0].name == "_ZN5lab0223histogram_shared_kernelEPKhmPj");
  CHECK(k[0].arch == "sm_75");
  CHECK(k[0].registers == 12);
  CHECK(k[0].shared_bytes == 1024);
  CHECK(k[0].spill_store_bytes == 0);
  CHECK(k[1].registers == 255);
  CHECK(k[1].stack_bytes == 128);
  CHECK(k[1].spill_store_bytes == 64);
  CHECK(k[1].spill_load_bytes == 32);
  std::vector<std::string> lines, hints;
  gpulab::cli::KernelResources mine = k[1], ref = k[1];
  mine.name = ref.name = "lab::spill";
  ref.registers = 40;
  ref.stack_bytes = ref.spill_store_bytes = 0;
  gpulab::cli::describe_resources({mine}, {ref}, lines, hints);
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].find("[reference: 40 registers") != std::string::npos);
  REQUIRE(hints.size() == 2);
  CHECK(hints[0].find("128 bytes of local memory per thread") != std::string::npos);
  CHECK(hints[1].find("255 registers per thread: at most 257 threads per SM") != std::string::npos);
}

TEST_CASE("a kernel in an anonymous namespace or a template keeps its name on the resource line", "[cpu]") {
  // c++filt's names for lab 06's and lab 04's kernels (the '(' of "(anonymous namespace)" once cut them to "").
  CHECK(gpulab::cli::qualified_name("lab06::(anonymous namespace)::transform_kernel(float const*, float*, unsigned long)") ==
        "lab06::(anonymous namespace)::transform_kernel");
  CHECK(gpulab::cli::qualified_name("void lab04::(anonymous namespace)::hgemm_tile<128, 4>(lab04::Operands)") ==
        "lab04::(anonymous namespace)::hgemm_tile<128, 4>");
  CHECK(gpulab::cli::qualified_name("lab01::vector_add_kernel(float const*, float const*, float*, long)") == "lab01::vector_add_kernel");
  gpulab::cli::KernelResources k;
  k.name = "lab04::(anonymous namespace)::hgemm_tile<lab04::Tile, 4>";
  k.arch = "sm_75";
  k.registers = 24;
  std::vector<std::string> lines, hints;
  gpulab::cli::describe_resources({k}, {}, lines, hints);
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].rfind("hgemm_tile<lab04::Tile, 4> (sm_75): 24 registers", 0) == 0);
}

TEST_CASE("kernel figures from the GPU read as one line with hints", "[cpu]") {
  const nlohmann::json mine = {{"registers", 168}, {"static_smem_bytes", 8192}, {"dynamic_smem_bytes", 0},
                               {"local_bytes", 32}, {"threads_per_block", 256}, {"blocks_per_sm", 1},
                               {"occupancy", 0.125}};
  const nlohmann::json ref = {{"registers", 128}, {"static_smem_bytes", 33280}, {"dynamic_smem_bytes", 0},
                              {"local_bytes", 0}, {"threads_per_block", 256}, {"blocks_per_sm", 2},
                              {"occupancy", 0.25}};
  std::vector<std::string> lines, hints;
  gpulab::cli::describe_kernel_fields(mine, ref, "yours", lines, hints);
  REQUIRE(lines.size() == 1);
  CHECK(lines[0] == "kernel (yours): 168 registers, 8.0 KB shared, 32 B local; 1 blocks of 256 threads per SM = 12 % "
                    "occupancy; reference: 128 registers, 32.5 KB shared, 0 B local; 2 blocks of 256 threads per SM = 25 % "
                    "occupancy");
  REQUIRE(hints.size() == 2);
  CHECK(hints[0].find("32 bytes of local memory per thread") == 0);
  CHECK(hints[1] == "occupancy 12 % against the reference's 25 %: 168 registers per thread leave room for fewer blocks");
  lines.clear();
  hints.clear();
  gpulab::cli::describe_kernel_fields(ref, nullptr, "reference", lines, hints);
  CHECK(lines.size() == 1);
  CHECK(hints.empty());
  // Captured launches: matched by name; a failed capture says why.
  nlohmann::json a = mine, b = ref, c = ref;
  a["name"] = "lab::step2";
  b["name"] = "lab::step1";
  c["name"] = "lab::step2";
  lines.clear();
  hints.clear();
  gpulab::cli::describe_launched_kernels(nlohmann::json::array({a}), nlohmann::json::array({b, c}), "yours", lines, hints);
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].find("kernel lab::step2 (yours): 168 registers") == 0);
  CHECK(lines[0].find("; reference: 128 registers") != std::string::npos);
  lines.clear();
  gpulab::cli::describe_launched_kernels({{"error", "the launches could not be captured"}}, nullptr, "yours", lines, hints);
  REQUIRE(lines.size() == 1);
  CHECK(lines[0] == "kernels (yours): not available: the launches could not be captured");
}

#include "docs/docs.hpp"

TEST_CASE("markdown headings get GitHub's anchors for the docs site", "[cpu]") {
  using gpulab::cli::github_anchor;
  CHECK(github_anchor("TODO(01.6) Write the RGB → grey kernel") == "todo016-write-the-rgb--grey-kernel");
  CHECK(github_anchor("Napkin math: the α-β model") == "napkin-math-the-α-β-model");
  CHECK(github_anchor("Little's law: bytes in flight") == "littles-law-bytes-in-flight");
  const std::string md = "# Title\n[see](#the-idea)\n```\n# not a heading\n```\n## The idea\n";
  const std::string out = gpulab::cli::doxygen_markdown(md, "lessons/05-x.md");
  CHECK(out.find("# Title {#md-05-x-title}") != std::string::npos);
  CHECK(out.find("[see](#md-05-x-the-idea)") != std::string::npos);
  CHECK(out.find("## The idea {#md-05-x-the-idea}") != std::string::npos);
  CHECK(out.find("# not a heading\n") != std::string::npos);  // code blocks untouched
  CHECK(gpulab::cli::doxygen_markdown("# x\n", "a.hpp") == "# x\n");
  // Doxygen 1.9.4 reads nothing inside ASCII double quotes, nor code in link text; bold it closes
  // only before some punctuation; a pipe in a table cell's code it shows escaped.
  const std::string spans = gpulab::cli::doxygen_markdown(
      "'split free blocks' became `max_split_size_mb`; see [`lessons/`](lessons), [`cvt.rna` rounding](#tf32) and **`./gpulab grade 05`**.\n"
      "**Reading `NCCL_DEBUG=INFO`.** A `**` in code, \"× `w` × s\" and `--case \"two\n"
      "lines\"` joined, **1.6 ms**; **bold\n"
      "across** lines.\n"
      "| `up\\|down` | pipe | `the ranks' _x` |\n"
      "```\n`kept`\n```\nan odd ` stays\n"
      "1. a step:\n\n   ```\n   ./gpulab grade 01 \"x\"   # `odd\n   ```\n"
      "- an item with `code\n  across` lines\n+ p − 1) is text\n"
      "see [`std::vector<int>`](https://example.com)\n",
      "lessons/05-x.md");
  CHECK(spans.find("became `max_split_size_mb`;") != std::string::npos);          // Doxygen reads it right
  CHECK(spans.find("see `lessons/`,") != std::string::npos);                      // the site has no folder to link to
  CHECK(spans.find("[cvt.rna rounding](#md-05-x-tf32)") != std::string::npos);   // a page: the link keeps plain text
  CHECK(spans.find("and <b>`./gpulab grade 05`</b>.") != std::string::npos);
  CHECK(spans.find("<b>Reading `NCCL_DEBUG=INFO`.</b> A `**` in code, &quot;× `w` × s&quot; and `--case \"two lines\"` joined, "
                   "<b>1.6 ms</b>; <b>bold across</b> lines.\n") != std::string::npos);
  CHECK(spans.find("| <code>up\\|down</code> | pipe | <code>the ranks' _x</code> |") != std::string::npos);
  CHECK(spans.find("```\n`kept`\n```") != std::string::npos);
  CHECK(spans.find("an odd ` stays") != std::string::npos);
  CHECK(spans.find("   ```\n   ./gpulab grade 01 \"x\"   # `odd\n   ```\n") != std::string::npos);  // an indented fence: as written
  CHECK(spans.find("- an item with `code across` lines\n+ p") != std::string::npos);  // joined, up to the next item
  CHECK(spans.find("see [std::vector&lt;int&gt;](https://example.com)") != std::string::npos);
}

TEST_CASE("the docs check finds markdown the site rendered otherwise than written", "[cpu]") {
  using gpulab::cli::docs_problems;
  const std::string head = "<div class=\"header\">`not read`</div><div class=\"contents\">";
  CHECK(docs_problems(head + "<p>a <code>x_y --z</code> and <b>bold</b></p><div class=\"fragment\"><div class=\"line\">`code` **x**</div></div><!-- fragment -->"
                             "<blockquote class=\"doxtable\"><p><b>Key concepts / APIs</b></p></blockquote></div>").empty());
  const auto found = docs_problems(head + "<p>**<code>x</code>** and [<code>y</code>](lessons) `z`</p><blockquote><p>1 MiB</p></blockquote>"
                                          "<p><code>a&amp;#95;b</code> <code>&ndash;case</code></p></div>");
  CHECK(docs_problems(head + "<div class=\"fragment\"></div><!-- fragment --></div>") ==
        std::vector<std::string>{"a code block rendered empty (its lines joined onto the fence?)"});
  REQUIRE(found.size() == 8);
  CHECK(found[0].rfind("a block quote", 0) == 0);
  CHECK(found[1].rfind("an entity shown raw in code", 0) == 0);
  CHECK(found[2].rfind("a dash made typographic in code", 0) == 0);
  CHECK(found[3].rfind("markdown shown raw (`)", 0) == 0);  // both of `z`'s
  CHECK(found[4].rfind("markdown shown raw (`)", 0) == 0);
  CHECK(found[5].rfind("markdown shown raw (**)", 0) == 0);
  CHECK(found[6].rfind("markdown shown raw (**)", 0) == 0);
  CHECK(found[7].rfind("markdown shown raw (](): ", 0) == 0);
}
